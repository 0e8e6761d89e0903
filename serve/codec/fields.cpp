#include "serve/codec/fields.hpp"

#include <limits>
#include <stdexcept>

namespace kvtier::serve::wire {

namespace {

[[noreturn]] void wrong(std::string_view key, const char* what) {
  throw std::runtime_error("reply field '" + std::string(key) + "' missing or not " + what);
}

uint64_t as_u64(const msgpack::object& o, std::string_view key) {
  if (o.type != msgpack::type::POSITIVE_INTEGER)
    wrong(key, "unsigned");
  return o.via.u64;
}

uint32_t as_u32(const msgpack::object& o, std::string_view key) {
  uint64_t v = as_u64(o, key);
  if (v > std::numeric_limits<uint32_t>::max())
    wrong(key, "a 32-bit unsigned");
  return static_cast<uint32_t>(v);
}

int64_t as_i64(const msgpack::object& o, std::string_view key) {
  if (o.type == msgpack::type::POSITIVE_INTEGER
      && o.via.u64 <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(o.via.u64);
  if (o.type == msgpack::type::NEGATIVE_INTEGER)
    return o.via.i64;
  wrong(key, "an integer");
}

}  // namespace

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
    wrong(key, "present");
  return *o;
}

uint64_t u64(const msgpack::object& map, std::string_view key) {
  const msgpack::object* o = find(map, key);
  if (!o)
    wrong(key, "unsigned");
  return as_u64(*o, key);
}

uint32_t u32(const msgpack::object& map, std::string_view key) {
  return as_u32(field(map, key), key);
}

int64_t i64(const msgpack::object& map, std::string_view key) {
  const msgpack::object* o = find(map, key);
  if (!o)
    wrong(key, "an integer");
  return as_i64(*o, key);
}

bool flag(const msgpack::object& map, std::string_view key) {
  const msgpack::object* o = find(map, key);
  if (!o || o->type != msgpack::type::BOOLEAN)
    wrong(key, "a bool");
  return o->via.boolean;
}

std::string str(const msgpack::object& map, std::string_view key) {
  const msgpack::object* o = find(map, key);
  if (!o || o->type != msgpack::type::STR)
    wrong(key, "a string");
  return std::string(o->via.str.ptr, o->via.str.size);
}

const msgpack::object_array& array(const msgpack::object& map, std::string_view key) {
  const msgpack::object* o = find(map, key);
  if (!o || o->type != msgpack::type::ARRAY)
    wrong(key, "an array");
  return o->via.array;
}

std::vector<uint64_t> u64s(const msgpack::object& map, std::string_view key) {
  const msgpack::object_array& a = array(map, key);
  std::vector<uint64_t> out;
  out.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i)
    out.push_back(as_u64(a.ptr[i], key));
  return out;
}

std::vector<uint32_t> u32s(const msgpack::object& map, std::string_view key) {
  const msgpack::object_array& a = array(map, key);
  std::vector<uint32_t> out;
  out.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i)
    out.push_back(as_u32(a.ptr[i], key));
  return out;
}

std::vector<int64_t> i64s(const msgpack::object& map, std::string_view key) {
  const msgpack::object_array& a = array(map, key);
  std::vector<int64_t> out;
  out.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i)
    out.push_back(as_i64(a.ptr[i], key));
  return out;
}

}  // namespace kvtier::serve::wire
