#include "serve/wire/fields.hpp"

#include <cstring>
#include <limits>

namespace kvtier::serve::wire {

namespace {

[[noreturn]] void wrong(std::string_view what, const char* should) {
  throw field_error("'" + std::string(what) + "' " + should);
}

template <class T, class Read>
std::vector<T> elements(const msgpack::object& o, std::string_view what, Read read) {
  const msgpack::object_array& a = as_array(o, what);
  std::vector<T> out;
  out.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i)
    out.push_back(read(a.ptr[i], what));
  return out;
}

}  // namespace

std::string_view as_key(const msgpack::object& o) {
  if (o.type != msgpack::type::STR)
    throw field_error("a map key is not a string");
  return {o.via.str.ptr, o.via.str.size};
}

uint64_t as_uint(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::POSITIVE_INTEGER)
    wrong(what, "must be an unsigned integer");
  return o.via.u64;
}

uint32_t as_u32(const msgpack::object& o, std::string_view what) {
  uint64_t v = as_uint(o, what);
  if (v > std::numeric_limits<uint32_t>::max())
    throw field_error("'" + std::string(what) + "' is beyond 2^32-1: " + std::to_string(v));
  return static_cast<uint32_t>(v);
}

int32_t as_i32(const msgpack::object& o, std::string_view what) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      wrong(what, "holds a value beyond int32");
    return static_cast<int32_t>(o.via.u64);
  }
  if (o.type != msgpack::type::NEGATIVE_INTEGER)
    wrong(what, "must hold integers");
  if (o.via.i64 < std::numeric_limits<int32_t>::min())
    wrong(what, "holds a value beyond int32");
  return static_cast<int32_t>(o.via.i64);
}

int64_t as_i64(const msgpack::object& o, std::string_view what) {
  if (o.type == msgpack::type::POSITIVE_INTEGER
      && o.via.u64 <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(o.via.u64);
  if (o.type != msgpack::type::NEGATIVE_INTEGER)
    wrong(what, "must be a 64-bit signed integer");
  return o.via.i64;
}

// msgpack-c packs a double that holds an integer as that integer (1.0 as 1).
double as_f64(const msgpack::object& o, std::string_view what) {
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return o.via.f64;
    case msgpack::type::POSITIVE_INTEGER: return static_cast<double>(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return static_cast<double>(o.via.i64);
    default: wrong(what, "must be a number");
  }
}

bool as_bool(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::BOOLEAN)
    wrong(what, "must be a bool");
  return o.via.boolean;
}

std::string as_str(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::STR)
    wrong(what, "must be a string");
  return std::string(o.via.str.ptr, o.via.str.size);
}

const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::ARRAY)
    wrong(what, "must be an array");
  return o.via.array;
}

const msgpack::object_map& as_map(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::MAP)
    wrong(what, "must be a map");
  return o.via.map;
}

std::vector<uint64_t> as_uints(const msgpack::object& o, std::string_view what) {
  return elements<uint64_t>(o, what, as_uint);
}

std::vector<uint32_t> as_u32s(const msgpack::object& o, std::string_view what) {
  return elements<uint32_t>(o, what, as_u32);
}

std::vector<int64_t> as_i64s(const msgpack::object& o, std::string_view what) {
  return elements<int64_t>(o, what, as_i64);
}

std::vector<double> as_f64s(const msgpack::object& o, std::string_view what) {
  return elements<double>(o, what, as_f64);
}

ipc_bytes as_handle(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::BIN)
    wrong(what, "must be binary (a CUDA IPC handle)");
  if (o.via.bin.size != ipc_handle_size)
    throw field_error("'" + std::string(what) + "' holds " + std::to_string(o.via.bin.size)
                      + " bytes; a CUDA IPC handle has " + std::to_string(ipc_handle_size));
  ipc_bytes out;
  std::memcpy(out.data(), o.via.bin.ptr, ipc_handle_size);
  return out;
}

const msgpack::object* find(const msgpack::object& map, std::string_view key) {
  if (map.type != msgpack::type::MAP)
    return nullptr;
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR
        && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
      return &kv.val;
  }
  return nullptr;
}

const msgpack::object& field(const msgpack::object& map, std::string_view key) {
  const msgpack::object* o = find(map, key);
  if (!o)
    wrong(key, "is missing");
  return *o;
}

uint64_t u64(const msgpack::object& map, std::string_view key) {
  return as_uint(field(map, key), key);
}

uint32_t u32(const msgpack::object& map, std::string_view key) {
  return as_u32(field(map, key), key);
}

int64_t i64(const msgpack::object& map, std::string_view key) {
  return as_i64(field(map, key), key);
}

double f64(const msgpack::object& map, std::string_view key) {
  return as_f64(field(map, key), key);
}

bool flag(const msgpack::object& map, std::string_view key) {
  return as_bool(field(map, key), key);
}

std::string str(const msgpack::object& map, std::string_view key) {
  return as_str(field(map, key), key);
}

const msgpack::object_array& array(const msgpack::object& map, std::string_view key) {
  return as_array(field(map, key), key);
}

std::vector<uint64_t> u64s(const msgpack::object& map, std::string_view key) {
  return as_uints(field(map, key), key);
}

std::vector<uint32_t> u32s(const msgpack::object& map, std::string_view key) {
  return as_u32s(field(map, key), key);
}

std::vector<int64_t> i64s(const msgpack::object& map, std::string_view key) {
  return as_i64s(field(map, key), key);
}

std::vector<double> f64s(const msgpack::object& map, std::string_view key) {
  return as_f64s(field(map, key), key);
}

}  // namespace kvtier::serve::wire
