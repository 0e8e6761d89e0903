#include "sim/trace/json_fields.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "sim/trace/line_file.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

static_assert(line_padding >= simdjson::SIMDJSON_PADDING,
              "lines must carry the padding that simdjson reads past a document");

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr int64_t ns_per_s = 1'000'000'000;

std::string field_name(const json_at& at, std::string_view field) {
  std::string name = at.prefix;
  name += field;
  return name;
}

}  // namespace

void json_at::fail(std::string_view field, const std::string& message) const {
  throw trace_error(file, line, field.empty() ? std::string() : field_name(*this, field),
                    message);
}

simdjson::padded_string json_read_file(const std::string& path, uint64_t max_bytes) {
  std::FILE* file = open_trace_file(path);
  std::string text;
  char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0) {
    if (text.size() + got > max_bytes) {
      std::fclose(file);
      throw trace_error(path, 0, "",
                        "the document is larger than " + std::to_string(max_bytes) +
                          " bytes (trace.max_document_bytes; --set trace.max_document_bytes=N "
                          "reads larger ones)");
    }
    text.append(chunk, got);
  }
  bool failed = std::ferror(file);
  int error = errno;
  std::fclose(file);
  if (failed)
    throw trace_error(path, 0, "", std::string("cannot read: ") + std::strerror(error));
  // The line readers drop a byte order mark too; editors on Windows write one.
  std::string_view body = text;
  if (body.substr(0, 3) == "\xEF\xBB\xBF")
    body.remove_prefix(3);
  return simdjson::padded_string(body);
}

simdjson::dom::object json_object_line(simdjson::dom::parser& parser, std::string_view text,
                                       const json_at& at) {
  element root;
  auto error = parser.parse(text.data(), text.size(), false).get(root);
  if (error)
    at.fail("", std::string("malformed JSON: ") + simdjson::error_message(error));
  if (root.type() != element_type::OBJECT)
    at.fail("", "expected a JSON object, got " + json_describe(root));
  return root.get_object().value_unsafe();
}

simdjson::dom::object json_object(const json_at& at, std::string_view field, element value) {
  if (value.type() != element_type::OBJECT)
    at.fail(field, "expected an object, got " + json_describe(value));
  return value.get_object().value_unsafe();
}

simdjson::dom::array json_array(const json_at& at, std::string_view field, element value) {
  if (value.type() != element_type::ARRAY)
    at.fail(field, "expected an array, got " + json_describe(value));
  return value.get_array().value_unsafe();
}

std::string_view json_string(const json_at& at, std::string_view field, element value) {
  if (value.type() != element_type::STRING)
    at.fail(field, "expected a string, got " + json_describe(value));
  return value.get_string().value_unsafe();
}

uint64_t json_uint(const json_at& at, std::string_view field, element value, uint64_t min,
                   uint64_t max) {
  uint64_t n = 0;
  bool negative = false;
  switch (value.type()) {
    case element_type::INT64: {
      int64_t i = value.get_int64().value_unsafe();
      negative = i < 0;
      n = negative ? 0 : static_cast<uint64_t>(i);
      break;
    }
    case element_type::UINT64:
      n = value.get_uint64().value_unsafe();
      break;
    default:
      at.fail(field, "expected an integer, got " + json_describe(value));
  }
  if (negative || n < min)
    at.fail(field, "expected an integer >= " + std::to_string(min) + ", got " +
                       json_describe(value));
  if (n > max)
    at.fail(field, "expected an integer <= " + std::to_string(max) + ", got " +
                       json_describe(value));
  return n;
}

int64_t json_seconds_ns(const json_at& at, std::string_view field, element value) {
  constexpr int64_t max_ns = std::numeric_limits<int64_t>::max();
  auto bad = [&](const char* why) {
    at.fail(field, std::string("expected a number of seconds ") + why + ", got " +
                       json_describe(value));
  };
  switch (value.type()) {
    case element_type::INT64:
    case element_type::UINT64: {
      if (value.type() == element_type::INT64 && value.get_int64().value_unsafe() < 0)
        bad(">= 0");
      uint64_t s = value.get_uint64().value_unsafe();
      if (s > uint64_t{max_ns / ns_per_s})
        bad("that fits in 64-bit nanoseconds");
      return static_cast<int64_t>(s) * ns_per_s;
    }
    case element_type::DOUBLE: {
      double s = value.get_double().value_unsafe();
      if (!(s >= 0))
        bad(">= 0");
      double ns = std::round(s * 1e9);
      if (ns >= 9.2e18)
        bad("that fits in 64-bit nanoseconds");
      return static_cast<int64_t>(ns);
    }
    default:
      bad(">= 0");
  }
  return 0;  // not reached: bad() throws
}

void json_ids(const json_at& at, std::string_view field, element value,
              std::vector<uint64_t>& out) {
  auto array = json_array(at, field, value);
  out.clear();
  out.reserve(array.size());
  for (element e : array) {
    element_type type = e.type();
    if (type == element_type::INT64) {
      int64_t i = e.get_int64().value_unsafe();
      if (i < 0)
        at.fail(field, "element " + std::to_string(out.size()) +
                           ": expected an integer >= 0, got " + json_describe(e));
      out.push_back(static_cast<uint64_t>(i));
    } else if (type == element_type::UINT64) {
      out.push_back(e.get_uint64().value_unsafe());
    } else {
      at.fail(field, "element " + std::to_string(out.size()) + ": expected an integer, got " +
                         json_describe(e));
    }
  }
}

void json_tokens(const json_at& at, std::string_view field, element value,
                 std::vector<int32_t>& out) {
  auto array = json_array(at, field, value);
  out.clear();
  out.reserve(array.size());
  for (element e : array) {
    int64_t i = 0;
    if (e.type() != element_type::INT64 || (i = e.get_int64().value_unsafe()) < 0 ||
        i > std::numeric_limits<int32_t>::max())
      at.fail(field, "element " + std::to_string(out.size()) +
                         ": expected a token id from 0 to 2147483647, got " + json_describe(e));
    out.push_back(static_cast<int32_t>(i));
  }
}

std::string json_describe(element value) {
  switch (value.type()) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
      return std::to_string(value.get_int64().value_unsafe());
    case element_type::UINT64:
      return std::to_string(value.get_uint64().value_unsafe());
    case element_type::DOUBLE: {
      char text[32];
      auto end = std::to_chars(text, text + sizeof text, value.get_double().value_unsafe()).ptr;
      return std::string(text, end);
    }
    case element_type::STRING: {
      constexpr size_t shown = 40;
      std::string_view s = value.get_string().value_unsafe();
      return '"' + std::string(s.substr(0, shown)) + (s.size() > shown ? "...\"" : "\"");
    }
    case element_type::BOOL:
      return value.get_bool().value_unsafe() ? "true" : "false";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "an unknown value";
}

void json_unique_keys(const json_at& at, std::string_view field, simdjson::dom::object object) {
  // Objects of a trace hold a handful of keys: comparing every pair costs less than a set.
  size_t index = 0;
  for (auto entry : object) {
    size_t other = 0;
    for (auto earlier : object) {
      if (other++ == index)
        break;
      if (earlier.key == entry.key) {
        std::string name = field.empty() ? std::string(entry.key)
                                         : std::string(field) + "." + std::string(entry.key);
        at.fail(name, "appears twice");
      }
    }
    ++index;
  }
}

void json_mark_seen(const json_at& at, std::string_view field, uint32_t& seen, uint32_t bit) {
  if (seen & (uint32_t{1} << bit))
    at.fail(field, "appears twice");
  seen |= uint32_t{1} << bit;
}

}  // namespace kvtier
