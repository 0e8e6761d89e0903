#include <cstring>
#include <limits>
#include <string_view>

#include <msgpack.hpp>

#include "serve/call.hpp"

namespace kvtier::serve {

namespace {

const char* const verb_names[verb_count] = {"hello", "lookup", "allocate", "wait",  "probe",
                                            "step",  "commit", "save",     "free",  "preempt",
                                            "finish", "stats", "ping",     "bye",
                                            "bench_swap"};
const char* const error_names[error_kind_count] = {
  "malformed", "unknown_op", "too_large", "unauthorized", "version",
  "model_mismatch", "not_registered", "bad_request", "shutting_down"};

struct bad : std::exception {
  std::string message;
  explicit bad(std::string m) : message(std::move(m)) {}
};

std::string_view as_key(const msgpack::object& o) {
  if (o.type != msgpack::type::STR)
    throw bad("a map key is not a string");
  return {o.via.str.ptr, o.via.str.size};
}

uint64_t as_uint(const msgpack::object& o, std::string_view what) {
  if (o.type == msgpack::type::POSITIVE_INTEGER)
    return o.via.u64;
  throw bad("'" + std::string(what) + "' must be an unsigned integer");
}

uint32_t as_u32(const msgpack::object& o, std::string_view what) {
  uint64_t v = as_uint(o, what);
  if (v > std::numeric_limits<uint32_t>::max())
    throw bad("'" + std::string(what) + "' is beyond 2^32-1: " + std::to_string(v));
  return static_cast<uint32_t>(v);
}

int32_t as_i32(const msgpack::object& o, std::string_view what) {
  int64_t v = 0;
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
      throw bad("'" + std::string(what) + "' holds a value beyond int32");
    v = static_cast<int64_t>(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    v = o.via.i64;
    if (v < std::numeric_limits<int32_t>::min())
      throw bad("'" + std::string(what) + "' holds a value beyond int32");
  } else {
    throw bad("'" + std::string(what) + "' must hold integers");
  }
  return static_cast<int32_t>(v);
}

std::string as_str(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::STR)
    throw bad("'" + std::string(what) + "' must be a string");
  return std::string(o.via.str.ptr, o.via.str.size);
}

const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what) {
  if (o.type != msgpack::type::ARRAY)
    throw bad("'" + std::string(what) + "' must be an array");
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
      throw bad("'" + std::string(what) + "' entries must be [req, tokens]");
    out.push_back({as_uint(pair.ptr[0], what), as_u32(pair.ptr[1], what)});
  }
  return out;
}

void read_model(const msgpack::object& o, model_shape& m) {
  if (o.type != msgpack::type::MAP)
    throw bad("'model' must be a map");
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
      throw bad(std::string("'model' lacks '") + names[i] + "'");
}

ipc_bytes as_handle(const msgpack::object& o, const std::string& what) {
  if (o.type != msgpack::type::BIN)
    throw bad("'" + what + "' must be binary (a CUDA IPC handle)");
  if (o.via.bin.size != ipc_handle_size)
    throw bad("'" + what + "' holds " + std::to_string(o.via.bin.size) + " bytes; a CUDA IPC "
              "handle has " + std::to_string(ipc_handle_size));
  ipc_bytes out;
  std::memcpy(out.data(), o.via.bin.ptr, ipc_handle_size);
  return out;
}

// hello's `tensors`: {device_blocks, layers: [[handle, offset]], event_slots, events: [handle]}.
void read_tensors(const msgpack::object& o, attach_request& t) {
  if (o.type != msgpack::type::MAP)
    throw bad("'tensors' must be a map");
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
          throw bad("'" + what + "' must be [handle, offset]");
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
      throw bad(std::string("'tensors' lacks '") + names[i] + "'");
  t.present = true;
}

void set_form(prompt& p, prompt::form f) {
  if (p.kind != prompt::form::none)
    throw bad("a prompt must be one of 'tokens', 'hashes' or 'blocks', not several");
  p.kind = f;
}

// The keys each verb requires, checked after the map is read.
enum need : uint32_t {
  need_req = 1, need_tokens = 2, need_prompt = 4, need_step = 8, need_hello = 16,
  need_blocks = 32,
};

uint32_t needs_of(verb v) {
  switch (v) {
    case verb::hello: return need_hello;
    case verb::lookup: return need_prompt;
    case verb::allocate: return need_req;
    case verb::wait: case verb::free: case verb::preempt: case verb::finish: return need_req;
    case verb::commit: case verb::save: return need_req | need_tokens;
    case verb::probe: case verb::step: return need_step;
    case verb::bench_swap: return need_blocks;
    default: return 0;
  }
}

}  // namespace

const char* verb_name(verb v) { return verb_names[static_cast<int>(v)]; }

std::optional<verb> verb_of(std::string_view name) {
  for (int i = 0; i < verb_count; ++i)
    if (name == verb_names[i])
      return static_cast<verb>(i);
  return std::nullopt;
}

const char* error_name(error_kind k) { return error_names[static_cast<int>(k)]; }

std::optional<wire_error> decode_call(const char* data, size_t size, call& out) {
  out = call{};
  msgpack::object_handle handle;
  try {
    // Nesting and element counts bounded by the frame: a few bytes cannot claim a huge array.
    msgpack::unpack_limit limit(size, size, size, size, size, 8);
    std::size_t offset = 0;
    handle = msgpack::unpack(data, size, offset, nullptr, nullptr, limit);
    if (offset != size)
      return wire_error{error_kind::malformed, "trailing bytes after the message's map"};
  } catch (const std::exception& e) {
    return wire_error{error_kind::malformed, std::string("not a msgpack message: ") + e.what()};
  }
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::MAP)
    return wire_error{error_kind::malformed, "the message must be a msgpack map"};
  const auto& map = root.via.map;
  std::optional<std::string> op_name;
  bool have_version_list = false, have_block_size = false, have_model = false;
  bool have_req = false, have_tokens_count = false, have_step = false;
  bool have_blocks_count = false;
  try {
    // The id first, so that every later error can carry it.
    for (uint32_t i = 0; i < map.size; ++i)
      if (map.ptr[i].key.type == msgpack::type::STR && as_key(map.ptr[i].key) == "id"
          && map.ptr[i].val.type == msgpack::type::POSITIVE_INTEGER)
        out.id = map.ptr[i].val.via.u64;
    for (uint32_t i = 0; i < map.size; ++i) {
      std::string_view k = as_key(map.ptr[i].key);
      const msgpack::object& v = map.ptr[i].val;
      if (k == "op") op_name = as_str(v, "op");
      else if (k == "id") out.id = as_uint(v, "id");
      else if (k == "token") out.token = as_str(v, "token");
      else if (k == "engine") out.engine = as_uint(v, "engine");
      else if (k == "versions") out.versions = as_uints(v, "versions"), have_version_list = true;
      else if (k == "name") out.name = as_str(v, "name");
      else if (k == "model") read_model(v, out.model), have_model = true;
      else if (k == "block_size") out.block_size = as_u32(v, "block_size"), have_block_size = true;
      else if (k == "tiers") {
        const auto& a = as_array(v, "tiers");
        for (uint32_t j = 0; j < a.size; ++j)
          out.tiers.push_back(as_str(a.ptr[j], "tiers"));
      } else if (k == "tokens") {
        // `tokens` is a prompt (an array) or a token count (commit, save: an integer).
        if (v.type == msgpack::type::ARRAY) {
          set_form(out.text, prompt::form::tokens);
          const auto& a = v.via.array;
          out.text.tokens.reserve(a.size);
          for (uint32_t j = 0; j < a.size; ++j)
            out.text.tokens.push_back(as_i32(a.ptr[j], "tokens"));
        } else {
          out.tokens = as_u32(v, "tokens");
          have_tokens_count = true;
        }
      } else if (k == "extra_keys") out.text.extra_keys = as_uints(v, "extra_keys");
      else if (k == "hashes") {
        set_form(out.text, prompt::form::hashes);
        for (uint64_t h : as_uints(v, "hashes"))
          out.text.blocks.push_back({h, 0});
      } else if (k == "blocks" && v.type == msgpack::type::POSITIVE_INTEGER) {
        out.blocks = as_u32(v, "blocks");  // bench_swap's count
        have_blocks_count = true;
      } else if (k == "blocks") {
        set_form(out.text, prompt::form::blocks);
        const auto& a = as_array(v, "blocks");
        for (uint32_t j = 0; j < a.size; ++j) {
          const auto& pair = as_array(a.ptr[j], "blocks");
          if (pair.size != 2)
            throw bad("'blocks' entries must be [hash, tokens]");
          uint32_t n = as_u32(pair.ptr[1], "blocks");
          if (n == 0)
            throw bad("'blocks' entry " + std::to_string(j) + " holds 0 tokens");
          out.text.blocks.push_back({as_uint(pair.ptr[0], "blocks"), n});
        }
      } else if (k == "req") out.req = as_uint(v, "req"), have_req = true;
      else if (k == "step") out.step.step = out.probe.step = as_uint(v, "step"), have_step = true;
      else if (k == "candidates") out.probe.candidates = as_uints(v, "candidates");
      else if (k == "grow_blocks") out.probe.grow_blocks = as_u32(v, "grow_blocks");
      else if (k == "victims") out.probe.victims = as_uints(v, "victims");
      else if (k == "computed") out.step.computed = as_marks(v, "computed");
      else if (k == "finished") out.step.finished = as_uints(v, "finished");
      else if (k == "preempted") out.step.preempted = as_marks(v, "preempted");
      else if (k == "grows") out.step.grows = as_marks(v, "grows");
      else if (k == "admits") out.step.admits = as_marks(v, "admits");
      else if (k == "tensors") read_tensors(v, out.tensors);
      else if (k == "repeats") out.repeats = as_u32(v, "repeats");
      // other keys: ignored (a later version's additions)
    }
  } catch (const bad& e) {
    return wire_error{error_kind::malformed, e.message};
  }
  if (!op_name)
    return wire_error{error_kind::malformed, "the message has no 'op'"};
  auto op = verb_of(*op_name);
  if (!op)
    return wire_error{error_kind::unknown_op, "unknown op '" + *op_name + "'"};
  out.op = *op;
  uint32_t needs = needs_of(out.op);
  auto missing = [&](const char* key) {
    return wire_error{error_kind::malformed,
                      std::string("'") + verb_name(out.op) + "' needs '" + key + "'"};
  };
  if ((needs & need_req) && !have_req)
    return missing("req");
  if ((needs & need_tokens) && !have_tokens_count)
    return missing("tokens");
  if ((needs & need_prompt) && out.text.kind == prompt::form::none)
    return missing("tokens', 'hashes' or 'blocks");
  if ((needs & need_step) && !have_step)
    return missing("step");
  if ((needs & need_blocks) && !have_blocks_count)
    return missing("blocks");
  if (out.op == verb::bench_swap && (out.repeats == 0 || out.repeats > 1000))
    return wire_error{error_kind::malformed, "'repeats' must be in [1, 1000]"};
  if (needs & need_hello) {
    if (!have_version_list)
      return missing("versions");
    if (!have_model)
      return missing("model");
    if (!have_block_size)
      return missing("block_size");
  }
  if (out.text.kind != prompt::form::tokens && !out.text.extra_keys.empty())
    return wire_error{error_kind::malformed, "'extra_keys' goes with a 'tokens' prompt only"};
  return std::nullopt;
}

}  // namespace kvtier::serve
