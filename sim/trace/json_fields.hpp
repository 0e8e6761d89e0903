#pragma once

// Typed access to the fields of a JSON trace record, failing with a trace_error that names the
// file, the line and the field, and says what was expected and what was found.

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier {

/// Where the values come from: the file, the line (or request number), and a prefix for field
/// names (e.g. "requests[3]." inside an agentic document).
struct json_at {
  const std::string& file;
  uint64_t line;
  std::string prefix;

  [[noreturn]] void fail(std::string_view field, const std::string& message) const;
};

/// The whole file, padded for simdjson, without a UTF-8 byte order mark; throws trace_error
/// (line 0) when it cannot be read or holds more than `max_bytes` (trace.max_document_bytes).
simdjson::padded_string json_read_file(const std::string& path, uint64_t max_bytes);

/// Parses `text`, which must be followed by line_padding readable bytes, as one JSON object.
simdjson::dom::object json_object_line(simdjson::dom::parser& parser, std::string_view text,
                                       const json_at& at);

/// The value as an object (`field` names it in errors).
simdjson::dom::object json_object(const json_at& at, std::string_view field,
                                  simdjson::dom::element value);
simdjson::dom::array json_array(const json_at& at, std::string_view field,
                                simdjson::dom::element value);
std::string_view json_string(const json_at& at, std::string_view field,
                             simdjson::dom::element value);

/// An integer in [min, max].
uint64_t json_uint(const json_at& at, std::string_view field, simdjson::dom::element value,
                   uint64_t min, uint64_t max);

/// A number of seconds >= 0 (integer or not), as whole nanoseconds.
int64_t json_seconds_ns(const json_at& at, std::string_view field,
                        simdjson::dom::element value);

/// An array of integers in [0, max], replacing the contents of `out`.
void json_ids(const json_at& at, std::string_view field, simdjson::dom::element value,
              std::vector<uint64_t>& out);
void json_tokens(const json_at& at, std::string_view field, simdjson::dom::element value,
                 std::vector<int32_t>& out);

/// The value in a few words for messages: `"text"`, `-3`, `1.5`, `an array`, `null`, ...
std::string json_describe(simdjson::dom::element value);

/// Fails if `object` (named `field`) holds a key twice: simdjson would keep both and a lookup
/// would silently take the first.
void json_unique_keys(const json_at& at, std::string_view field, simdjson::dom::object object);

/// Notes that field number `bit` was seen; fails if it was seen before (a duplicate key would
/// otherwise silently win or lose).
void json_mark_seen(const json_at& at, std::string_view field, uint32_t& seen, uint32_t bit);

}  // namespace kvtier
