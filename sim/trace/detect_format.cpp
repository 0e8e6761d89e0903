#include <string>

#include <sys/stat.h>

#include "sim/trace/json_fields.hpp"
#include "sim/trace/line_file.hpp"
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

trace_format detect_format(const std::string& path, const reader_options& options) {
  // Detection reads the first bytes and the reader reads them again: a pipe, a FIFO or a device
  // would hand the reader what detection left (or block). A regular file behind /dev/stdin or a
  // symlink is fine: stat follows links.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    throw trace_error(path, 0, "",
                      "is not a regular file (a pipe, FIFO or device), so its format cannot be "
                      "detected without consuming it: name the format with --format");
  std::string why;
  {
    line_file lines(path, options.max_line_bytes);
    std::string_view first;
    do {
      if (!lines.next(first))
        throw trace_error(path, 0, "", "the file is empty, so its format cannot be detected");
    } while (is_blank(first));
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
      // A first line that is not a JSON object may begin a pretty-printed agentic document;
      // larger files are not read whole just to find out.
      why = "its first line is not a whole JSON object";
    }
  }
  if (why.empty()) {
    simdjson::padded_string text = json_read_file(path, options.max_document_bytes);
    simdjson::dom::parser parser;
    simdjson::dom::object object;
    auto error = parser.parse(text).get_object().get(object);
    if (!error && format_of(object) == trace_format::agentic)
      return trace_format::agentic;
    why = error ? std::string("its first line is not a whole JSON object, nor is the file "
                              "(") + simdjson::error_message(error) + ")"
                : "it is a JSON document without \"requests\"";
  }
  throw trace_error(path, 0, "",
                    "cannot detect the format: tried azure (a CSV header TIMESTAMP,...), native "
                    "(a first line with \"kvtier_trace\"), mooncake (a first line with "
                    "\"timestamp\" and \"hash_ids\") and agentic (a JSON document with "
                    "\"requests\"), but " + why + "; name the format with --format");
}

}  // namespace kvtier
