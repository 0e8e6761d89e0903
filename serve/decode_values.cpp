#include "serve/decode_values.hpp"

#include <cstring>
#include <limits>

namespace kvtier::serve::call_fields {

std::string_view as_key(const msgpack::object& o) {
  if (o.type != msgpack::type::STR)
    throw malformed_field("a map key is not a string");
  return {o.via.str.ptr, o.via.str.size};
}

uint64_t as_uint(const msgpack::object& o, std::string_view what) {
  if (o.type == msgpack::type::POSITIVE_INTEGER)
    return o.via.u64;
  throw malformed_field("'" + std::string(what) + "' must be an unsigned integer");
}

uint32_t as_u32(const msgpack::object& o, std::string_view what) {
  uint64_t v = as_uint(o, what);
  if (v > std::numeric_limits<uint32_t>::max())
    throw malformed_field("'" + std::string(what) + "' is beyond 2^32-1: " + std::to_string(v));
  return static_cast<uint32_t>(v);
}

int32_t as_i32(const msgpack::object& o, std::string_view what) {
  int64_t v = 0;
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      throw malformed_field("'" + std::string(what) + "' holds a value beyond int32");
    v = static_cast<int64_t>(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    v = o.via.i64;
    if (v < std::numeric_limits<int32_t>::min())
      throw malformed_field("'" + std::string(what) + "' holds a value beyond int32");
  } else {
    throw malformed_field("'" + std::string(what) + "' must hold integers");
  }
  return static_cast<int32_t>(v);
}

std::string as_str(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::STR)
    throw malformed_field("'" + std::string(what) + "' must be a string");
  return std::string(o.via.str.ptr, o.via.str.size);
}

const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::ARRAY)
    throw malformed_field("'" + std::string(what) + "' must be an array");
  return o.via.array;
}

std::vector<uint64_t> as_uints(const msgpack::object& o, std::string_view what) {
  const auto& a = as_array(o, what);
  std::vector<uint64_t> out;
  out.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i)
    out.push_back(as_uint(a.ptr[i], what));
  return out;
}

std::vector<token_mark> as_marks(const msgpack::object& o, std::string_view what) {
  const auto& a = as_array(o, what);
  std::vector<token_mark> out;
  out.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i) {
    const auto& pair = as_array(a.ptr[i], what);
    if (pair.size != 2)
      throw malformed_field("'" + std::string(what) + "' entries must be [req, tokens]");
    out.push_back({as_uint(pair.ptr[0], what), as_u32(pair.ptr[1], what)});
  }
  return out;
}

std::vector<token_mark> as_marks(const msgpack::object& o, std::string_view what,
                                 std::vector<std::vector<uint32_t>>& ids) {
  const auto& a = as_array(o, what);
  std::vector<token_mark> out;
  out.reserve(a.size);
  ids.assign(a.size, {});
  for (uint32_t i = 0; i < a.size; ++i) {
    const auto& entry = as_array(a.ptr[i], what);
    if (entry.size != 2 && entry.size != 3)
      throw malformed_field("'" + std::string(what)
                            + "' entries must be [req, tokens] or [req, tokens, [block id]]");
    out.push_back({as_uint(entry.ptr[0], what), as_u32(entry.ptr[1], what)});
    if (entry.size == 3) {
      const auto& list = as_array(entry.ptr[2], what);
      ids[i].reserve(list.size);
      for (uint32_t j = 0; j < list.size; ++j)
        ids[i].push_back(as_u32(list.ptr[j], what));
    }
  }
  return out;
}

void read_model(const msgpack::object& o, model_shape& m) {
  if (o.type != msgpack::type::MAP)
    throw malformed_field("'model' must be a map");
  const auto& map = o.via.map;
  bool seen[5] = {};
  for (uint32_t i = 0; i < map.size; ++i) {
    std::string_view k = as_key(map.ptr[i].key);
    const msgpack::object& v = map.ptr[i].val;
    if (k == "name") m.name = as_str(v, "model.name"), seen[0] = true;
    else if (k == "layers") m.layers = as_u32(v, "model.layers"), seen[1] = true;
    else if (k == "kv_heads") m.kv_heads = as_u32(v, "model.kv_heads"), seen[2] = true;
    else if (k == "head_dim") m.head_dim = as_u32(v, "model.head_dim"), seen[3] = true;
    else if (k == "kv_dtype") m.kv_dtype = as_str(v, "model.kv_dtype"), seen[4] = true;
  }
  const char* names[5] = {"name", "layers", "kv_heads", "head_dim", "kv_dtype"};
  for (int i = 0; i < 5; ++i)
    if (!seen[i])
      throw malformed_field(std::string("'model' lacks '") + names[i] + "'");
}

namespace {

ipc_bytes as_handle(const msgpack::object& o, const std::string& what) {
  if (o.type != msgpack::type::BIN)
    throw malformed_field("'" + what + "' must be binary (a CUDA IPC handle)");
  if (o.via.bin.size != ipc_handle_size)
    throw malformed_field("'" + what + "' holds " + std::to_string(o.via.bin.size)
                          + " bytes; a CUDA IPC handle has " + std::to_string(ipc_handle_size));
  ipc_bytes out;
  std::memcpy(out.data(), o.via.bin.ptr, ipc_handle_size);
  return out;
}

}  // namespace

void read_tensors(const msgpack::object& o, attach_request& t) {
  if (o.type != msgpack::type::MAP)
    throw malformed_field("'tensors' must be a map");
  const auto& map = o.via.map;
  bool seen[4] = {};
  for (uint32_t i = 0; i < map.size; ++i) {
    std::string_view k = as_key(map.ptr[i].key);
    const msgpack::object& v = map.ptr[i].val;
    if (k == "device_blocks") {
      t.device_blocks = as_u32(v, "tensors.device_blocks");
      seen[0] = true;
    } else if (k == "layers") {
      const auto& a = as_array(v, "tensors.layers");
      for (uint32_t j = 0; j < a.size; ++j) {
        std::string what = "tensors.layers[" + std::to_string(j) + "]";
        const auto& pair = as_array(a.ptr[j], what);
        if (pair.size != 2)
          throw malformed_field("'" + what + "' must be [handle, offset]");
        t.layer_handles.push_back(as_handle(pair.ptr[0], what));
        t.layer_offsets.push_back(as_uint(pair.ptr[1], what));
      }
      seen[1] = true;
    } else if (k == "event_slots") {
      t.event_slots = as_u32(v, "tensors.event_slots");
      seen[2] = true;
    } else if (k == "events") {
      const auto& a = as_array(v, "tensors.events");
      for (uint32_t j = 0; j < a.size; ++j)
        t.events.push_back(as_handle(a.ptr[j], "tensors.events[" + std::to_string(j) + "]"));
      seen[3] = true;
    }
  }
  const char* names[4] = {"device_blocks", "layers", "event_slots", "events"};
  for (int i = 0; i < 4; ++i)
    if (!seen[i])
      throw malformed_field(std::string("'tensors' lacks '") + names[i] + "'");
  t.present = true;
}

}  // namespace kvtier::serve::call_fields
