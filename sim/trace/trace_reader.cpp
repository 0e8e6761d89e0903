#include "sim/trace/trace_reader.hpp"

#include <limits>

#include "core/check.hpp"
#include "sim/trace/readers.hpp"

namespace kvtier {

namespace {

std::string locate(const std::string& file, uint64_t line, const std::string& field,
                   const std::string& what) {
  std::string text = file;
  if (line > 0)
    text += ":" + std::to_string(line);
  text += ": ";
  if (!field.empty())
    text += "field '" + field + "': ";
  return text + what;
}

}  // namespace

const char* to_string(trace_format f) {
  switch (f) {
    case trace_format::detect:
      return "auto";
    case trace_format::mooncake:
      return "mooncake";
    case trace_format::azure:
      return "azure";
    case trace_format::agentic:
      return "agentic";
    case trace_format::native:
      return "native";
  }
  return "unknown";
}

std::optional<trace_format> parse_trace_format(const std::string& text) {
  for (auto f : {trace_format::detect, trace_format::mooncake, trace_format::azure,
                 trace_format::agentic, trace_format::native})
    if (text == to_string(f))
      return f;
  return std::nullopt;
}

trace_error::trace_error(std::string file, uint64_t line, std::string field,
                         const std::string& what)
    : std::runtime_error(locate(file, line, field, what)),
      file_(std::move(file)),
      line_(line),
      field_(std::move(field)),
      detail_(what) {
  // nop
}

std::unique_ptr<trace_source> open_trace(const std::string& path, trace_format format,
                                         uint32_t file_index, const reader_options& options) {
  // Session ids put file_index + 1 in their upper 32 bits.
  KVTIER_ASSERT(file_index < std::numeric_limits<uint32_t>::max());
  // One stream, opened once: detection reads its first lines and hands them back, so that a
  // pipe, a FIFO or process substitution is read whole by the reader.
  auto lines = std::make_unique<line_file>(path, options.max_line_bytes);
  if (format == trace_format::detect) {
    lines->hold();
    format = detect_format(*lines, options);
    lines->rewind();
  }
  switch (format) {
    case trace_format::mooncake:
      return open_mooncake(std::move(lines), file_index, options);
    case trace_format::azure:
      return open_azure(std::move(lines), file_index, options);
    case trace_format::agentic:
      return open_agentic(std::move(lines), file_index, options);
    case trace_format::native:
      return open_native(std::move(lines), file_index, options);
    case trace_format::detect:
      break;
  }
  KVTIER_ASSERT(false);
  return nullptr;
}

}  // namespace kvtier
