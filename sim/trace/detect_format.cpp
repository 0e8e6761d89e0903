#include <algorithm>
#include <string>

#include "sim/trace/json_fields.hpp"
#include "sim/trace/line_file.hpp"
#include "sim/trace/readers.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

std::optional<trace_format> format_of(simdjson::dom::object object) {
  auto has = [&](const char* key) { return !object[key].error(); };
  if (has("kvtier_trace"))
    return trace_format::native;
  if (has("requests"))
    return trace_format::agentic;
  if (has("timestamp") && has("hash_ids"))
    return trace_format::mooncake;
  return std::nullopt;
}

}  // namespace

trace_format detect_format(line_file& lines, const reader_options& options) {
  const std::string& path = lines.path();
  // The first line of an agentic document may be the whole document.
  uint64_t max_line = lines.max_line_bytes();
  lines.set_max_line_bytes(std::max(max_line, options.max_document_bytes),
                           "trace.max_line_bytes, or trace.max_document_bytes for a first line");
  std::string why;
  std::string_view first;
  do {
    if (!lines.next(first))
      throw trace_error(path, 0, "", "the file is empty, so its format cannot be detected");
  } while (is_blank(first));
  lines.set_max_line_bytes(max_line, "trace.max_line_bytes");
  if (first.substr(0, 10) == "TIMESTAMP,")
    return trace_format::azure;
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (!parser.parse(first.data(), first.size(), false).get_object().get(object)) {
    if (auto format = format_of(object))
      return *format;
    why = "its first line is a JSON object without those keys";
  } else if (first[first.find_first_not_of(" \t")] != '{') {
    why = "its first line is neither a CSV header nor a JSON object";
  } else if (lines.bytes_total() > options.max_document_bytes) {
    // A file known to be larger is not read whole just to find out.
    why = "its first line is not a whole JSON object";
  } else {
    // A first line that is not a JSON object may begin a pretty-printed agentic document: read
    // on (the stream holds what it read, for the reader), up to the document limit.
    std::string_view line;
    while (lines.held().size() <= options.max_document_bytes && lines.next(line)) {
    }
    std::string_view text = lines.held();
    if (text.size() > options.max_document_bytes) {
      why = "its first line is not a whole JSON object, and the file is larger than "
            "trace.max_document_bytes";
    } else {
      if (text.substr(0, 3) == "\xEF\xBB\xBF")
        text.remove_prefix(3);
      auto error = parser.parse(text.data(), text.size(), false).get_object().get(object);
      if (!error && format_of(object) == trace_format::agentic)
        return trace_format::agentic;
      why = error ? std::string("its first line is not a whole JSON object, nor is the file "
                                "(") + simdjson::error_message(error) + ")"
                  : "it is a JSON document without \"requests\"";
    }
  }
  throw trace_error(path, 0, "",
                    "cannot detect the format: tried azure (a CSV header TIMESTAMP,...), native "
                    "(a first line with \"kvtier_trace\"), mooncake (a first line with "
                    "\"timestamp\" and \"hash_ids\") and agentic (a JSON document with "
                    "\"requests\"), but " + why + "; name the format with --format");
}

trace_format detect_format(const std::string& path, const reader_options& options) {
  line_file lines(path, options.max_line_bytes);
  lines.hold();
  return detect_format(lines, options);
}

}  // namespace kvtier
