// The call decoder (docs/protocol.md): a frame to a `call`. The frequent calls are read from their
// bytes (call_readers.hpp); every other frame, and every error, through msgpack-c's objects and
// the one reader of their fields (fields.hpp), whose errors become the `malformed` reply's message.

#include <string_view>

#include <msgpack.hpp>

#include "serve/wire/call.hpp"
#include "serve/wire/call_readers.hpp"
#include "serve/wire/fields.hpp"

namespace kvtier::serve {

namespace {

using namespace wire;

void set_form(prompt& p, prompt::form f) {
  if (p.kind != prompt::form::none)
    throw field_error("a prompt must be one of 'tokens', 'hashes' or 'blocks', not several");
  p.kind = f;
}

// `[[req, tokens]]` lists of step and probe calls; with `ids`, each entry may carry a third
// element, the engine's device block ids (version 3), given in `ids` (an empty list where absent).
std::vector<token_mark> as_marks(const msgpack::object& o, std::string_view what,
                                 std::vector<std::vector<uint32_t>>* ids = nullptr) {
  const auto& a = as_array(o, what);
  std::vector<token_mark> out;
  out.reserve(a.size);
  if (ids)
    ids->assign(a.size, {});
  for (uint32_t i = 0; i < a.size; ++i) {
    const auto& entry = as_array(a.ptr[i], what);
    if (!ids && entry.size != 2)
      throw field_error("'" + std::string(what) + "' entries must be [req, tokens]");
    if (ids && entry.size != 2 && entry.size != 3)
      throw field_error("'" + std::string(what)
                        + "' entries must be [req, tokens] or [req, tokens, [block id]]");
    out.push_back({as_uint(entry.ptr[0], what), as_u32(entry.ptr[1], what)});
    if (entry.size == 3)
      (*ids)[i] = as_u32s(entry.ptr[2], what);
  }
  return out;
}

// An MLA model's latent: its parts, where given, make latent_dim, or must agree with it.
void check_latent(model_shape& m, bool parts) {
  if (!parts)
    return;
  uint64_t sum = uint64_t{m.kv_lora_rank} + m.rope_head_dim;
  if (sum > UINT32_MAX)
    throw field_error("'model.kv_lora_rank' + 'model.rope_head_dim' is out of range");
  if (m.latent_dim == 0)
    m.latent_dim = static_cast<uint32_t>(sum);
  else if (m.latent_dim != sum)
    throw field_error("'model.latent_dim' is " + std::to_string(m.latent_dim) +
                      ", not model.kv_lora_rank + model.rope_head_dim = " + std::to_string(sum));
}

// hello's `model`: every field of model_shape present; MLA's `latent_dim`, `kv_lora_rank` and
// `rope_head_dim` optional, 0 absent.
void read_model(const msgpack::object& o, model_shape& m) {
  const auto& map = as_map(o, "model");
  bool seen[5] = {};
  bool parts = false;
  for (uint32_t i = 0; i < map.size; ++i) {
    std::string_view k = as_key(map.ptr[i].key);
    const msgpack::object& v = map.ptr[i].val;
    if (k == "name") m.name = as_str(v, "model.name"), seen[0] = true;
    else if (k == "layers") m.layers = as_u32(v, "model.layers"), seen[1] = true;
    else if (k == "kv_heads") m.kv_heads = as_u32(v, "model.kv_heads"), seen[2] = true;
    else if (k == "head_dim") m.head_dim = as_u32(v, "model.head_dim"), seen[3] = true;
    else if (k == "kv_dtype") m.kv_dtype = as_str(v, "model.kv_dtype"), seen[4] = true;
    else if (k == "latent_dim") m.latent_dim = as_u32(v, "model.latent_dim");
    else if (k == "kv_lora_rank") m.kv_lora_rank = as_u32(v, "model.kv_lora_rank"), parts = true;
    else if (k == "rope_head_dim") m.rope_head_dim = as_u32(v, "model.rope_head_dim"), parts = true;
  }
  const char* names[5] = {"name", "layers", "kv_heads", "head_dim", "kv_dtype"};
  for (int i = 0; i < 5; ++i)
    if (!seen[i])
      throw field_error(std::string("'model' lacks '") + names[i] + "'");
  check_latent(m, parts);
}

// `tensors.layers`: [[handle (CUDA IPC, 64 bytes) or shared memory object name, offset]].
void read_tensor_layers(const msgpack::object& v, attach_request& t, uint32_t& named) {
  const auto& a = as_array(v, "tensors.layers");
  for (uint32_t j = 0; j < a.size; ++j) {
    std::string what = "tensors.layers[" + std::to_string(j) + "]";
    const auto& pair = as_array(a.ptr[j], what);
    if (pair.size != 2)
      throw field_error("'" + what + "' must be [handle, offset] or [segment, offset]");
    if (pair.ptr[0].type == msgpack::type::STR) {
      t.layer_segments.push_back(as_str(pair.ptr[0], what));
      ++named;
    } else {
      t.layer_handles.push_back(as_handle(pair.ptr[0], what));
    }
    t.layer_offsets.push_back(as_uint(pair.ptr[1], what));
  }
}

tensor_memory as_memory(const msgpack::object& v) {
  std::string m = as_str(v, "tensors.memory");
  if (m == "cuda_ipc")
    return tensor_memory::cuda_ipc;
  if (m == "shm")
    return tensor_memory::shm;
  throw field_error("'tensors.memory' is 'cuda_ipc' or 'shm', not '" + m + "'");
}

// `tensors`: {memory, device_blocks, layers, half_stride, block_stride, event_slots, and events
// (cuda_ipc) or signals (shm)}; memory and the strides optional.
void read_tensors(const msgpack::object& o, attach_request& t) {
  const auto& map = as_map(o, "tensors");
  bool seen[5] = {};
  uint32_t named = 0;
  for (uint32_t i = 0; i < map.size; ++i) {
    std::string_view k = as_key(map.ptr[i].key);
    const msgpack::object& v = map.ptr[i].val;
    if (k == "memory") {
      t.memory = as_memory(v);
    } else if (k == "device_blocks") {
      t.device_blocks = as_u32(v, "tensors.device_blocks");
      seen[0] = true;
    } else if (k == "layers") {
      read_tensor_layers(v, t, named);
      seen[1] = true;
    } else if (k == "event_slots") {
      t.event_slots = as_u32(v, "tensors.event_slots");
      seen[2] = true;
    } else if (k == "events") {
      const auto& a = as_array(v, "tensors.events");
      for (uint32_t j = 0; j < a.size; ++j)
        t.events.push_back(as_handle(a.ptr[j], "tensors.events[" + std::to_string(j) + "]"));
      seen[3] = true;
    } else if (k == "signals") {
      t.signals = as_str(v, "tensors.signals");
      seen[4] = true;
    } else if (k == "half_stride") {
      t.half_stride = as_uint(v, "tensors.half_stride");
    } else if (k == "block_stride") {
      t.block_stride = as_uint(v, "tensors.block_stride");
    }
  }
  bool shm = t.memory == tensor_memory::shm;
  const char* names[5] = {"device_blocks", "layers", "event_slots", "events", "signals"};
  for (int i = 0; i < 5; ++i)
    if (!seen[i] && i != (shm ? 3 : 4))
      throw field_error(std::string("'tensors' lacks '") + names[i] + "'");
  if (shm ? named != t.layer_offsets.size() : named != 0)
    throw field_error(shm ? "'tensors.layers' of memory 'shm' name shared memory objects"
                          : "'tensors.layers' of memory 'cuda_ipc' hold 64-byte IPC handles");
  t.present = true;
}

// hello's `config`: {key: JSON text}, keys unique.
void read_config(const msgpack::object& v, std::vector<std::pair<std::string, std::string>>& out) {
  if (v.type != msgpack::type::MAP)
    throw field_error("'config' must be a map of key to value text");
  const auto& m = v.via.map;
  for (uint32_t i = 0; i < m.size; ++i) {
    std::string key = as_str(m.ptr[i].key, "config");
    for (const auto& [seen, value] : out)
      if (seen == key)
        throw field_error("'config' names '" + key + "' twice");
    out.emplace_back(std::move(key), as_str(m.ptr[i].val, "config"));
  }
}

// The keys each verb requires, checked after the map is read.
enum need : uint32_t {
  need_req = 1, need_tokens = 2, need_prompt = 4, need_step = 8, need_hello = 16,
  need_blocks = 32, need_attach = 64,
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
    case verb::attach: return need_attach;
    default: return 0;
  }
}

// The frame as one msgpack map, or why it is not one.
std::optional<wire_error> unpack_map(const char* data, size_t size,
                                     msgpack::object_handle& handle) {
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
  if (handle.get().type != msgpack::type::MAP)
    return wire_error{error_kind::malformed, "the message must be a msgpack map"};
  return std::nullopt;
}

// The id first, so that every later error can carry it.
void read_id_first(const msgpack::object_map& map, call& out) {
  for (uint32_t i = 0; i < map.size; ++i)
    if (map.ptr[i].key.type == msgpack::type::STR && as_key(map.ptr[i].key) == "id"
        && map.ptr[i].val.type == msgpack::type::POSITIVE_INTEGER)
      out.id = map.ptr[i].val.via.u64;
}

// The envelope and hello's keys; false when `k` is none of them.
bool read_session_key(std::string_view k, const msgpack::object& v, call& out,
                      seen_keys& seen) {
  if (k == "op") seen.op_name = as_str(v, "op");
  else if (k == "id") out.id = as_uint(v, "id");
  else if (k == "token") out.token = as_str(v, "token");
  else if (k == "engine") out.engine = as_uint(v, "engine");
  else if (k == "versions") out.versions = as_uints(v, "versions"), seen.version_list = true;
  else if (k == "name") out.name = as_str(v, "name");
  else if (k == "model") read_model(v, out.model), seen.model = true;
  else if (k == "block_size") out.block_size = as_u32(v, "block_size"), seen.block_size = true;
  else if (k == "tiers") {
    const auto& a = as_array(v, "tiers");
    for (uint32_t j = 0; j < a.size; ++j)
      out.tiers.push_back(as_str(a.ptr[j], "tiers"));
  } else if (k == "config") read_config(v, out.config);
  else if (k == "tensors") read_tensors(v, out.tensors);
  else return false;
  return true;
}

// `tokens` is a prompt (an array) or a token count (commit, save: an integer).
void read_tokens(const msgpack::object& v, call& out, seen_keys& seen) {
  if (v.type == msgpack::type::ARRAY) {
    set_form(out.text, prompt::form::tokens);
    const auto& a = v.via.array;
    out.text.tokens.reserve(a.size);
    for (uint32_t j = 0; j < a.size; ++j)
      out.text.tokens.push_back(as_i32(a.ptr[j], "tokens"));
  } else if (v.type == msgpack::type::POSITIVE_INTEGER ||
             v.type == msgpack::type::NEGATIVE_INTEGER) {
    out.tokens = as_u32(v, "tokens");
    seen.tokens_count = true;
  } else {
    throw field_error("'tokens' must be a list of token ids (int32; a prompt: lookup, "
                      "allocate), or an unsigned integer (a token count: commit, save)");
  }
}

// `blocks` is a prompt ([[hash, tokens]]) or bench_swap's block count (an integer).
void read_blocks(const msgpack::object& v, call& out, seen_keys& seen) {
  if (v.type == msgpack::type::POSITIVE_INTEGER) {
    out.blocks = as_u32(v, "blocks");
    seen.blocks_count = true;
    return;
  }
  set_form(out.text, prompt::form::blocks);
  const auto& a = as_array(v, "blocks");
  for (uint32_t j = 0; j < a.size; ++j) {
    const auto& pair = as_array(a.ptr[j], "blocks");
    if (pair.size != 2)
      throw field_error("'blocks' entries must be [hash, tokens]");
    uint32_t n = as_u32(pair.ptr[1], "blocks");
    if (n == 0)
      throw field_error("'blocks' entry " + std::to_string(j) + " holds 0 tokens");
    out.text.blocks.push_back({as_uint(pair.ptr[0], "blocks"), n});
  }
}

// A request's keys: its prompt, its id and bench_swap's; false when `k` is none of them.
bool read_request_key(std::string_view k, const msgpack::object& v, call& out,
                      seen_keys& seen) {
  if (k == "tokens") read_tokens(v, out, seen);
  else if (k == "extra_keys") out.text.extra_keys = as_uints(v, "extra_keys");
  else if (k == "hashes") {
    set_form(out.text, prompt::form::hashes);
    for (uint64_t h : as_uints(v, "hashes"))
      out.text.blocks.push_back({h, 0});
  } else if (k == "blocks") read_blocks(v, out, seen);
  else if (k == "req") out.req = as_uint(v, "req"), seen.req = true;
  else if (k == "repeats") out.repeats = as_u32(v, "repeats");
  else if (k == "computed_tokens") out.computed_tokens = as_u32(v, "computed_tokens");
  else return false;
  return true;
}

// probe's and step's keys; false when `k` is none of them.
bool read_step_key(std::string_view k, const msgpack::object& v, call& out, seen_keys& seen) {
  if (k == "step") out.step.step = out.probe.step = as_uint(v, "step"), seen.step = true;
  else if (k == "candidates") out.probe.candidates = as_uints(v, "candidates");
  else if (k == "grow_blocks") out.probe.grow_blocks = as_u32(v, "grow_blocks");
  else if (k == "victims") out.probe.victims = as_uints(v, "victims");
  else if (k == "computed") out.step.computed = as_marks(v, "computed");
  else if (k == "finished") out.step.finished = as_uints(v, "finished");
  else if (k == "preempted") out.step.preempted = as_marks(v, "preempted");
  else if (k == "grows") out.step.grows = as_marks(v, "grows", &out.step.grow_blocks);
  else if (k == "admits") out.step.admits = as_marks(v, "admits", &out.step.admit_blocks);
  else if (k == "evicted") out.evicted = as_uints(v, "evicted");
  else return false;
  return true;
}

void read_keys(const msgpack::object_map& map, call& out, seen_keys& seen) {
  for (uint32_t i = 0; i < map.size; ++i) {
    std::string_view k = as_key(map.ptr[i].key);
    const msgpack::object& v = map.ptr[i].val;
    if (!read_session_key(k, v, out, seen) && !read_request_key(k, v, out, seen))
      read_step_key(k, v, out, seen);
    // other keys: ignored (a later version's additions)
  }
}

// The keys `out.op` requires, then the combinations no verb allows.
std::optional<wire_error> check_needs(const call& out, const seen_keys& seen) {
  uint32_t needs = needs_of(out.op);
  auto missing = [&](const char* key) {
    return wire_error{error_kind::malformed,
                      std::string("'") + verb_name(out.op) + "' needs '" + key + "'"};
  };
  if ((needs & need_req) && !seen.req)
    return missing("req");
  if ((needs & need_tokens) && !seen.tokens_count)
    return missing("tokens");
  if ((needs & need_prompt) && out.text.kind == prompt::form::none)
    return missing("tokens', 'hashes' or 'blocks");
  if ((needs & need_step) && !seen.step)
    return missing("step");
  if ((needs & need_blocks) && !seen.blocks_count)
    return missing("blocks");
  if (out.op == verb::bench_swap && (out.repeats == 0 || out.repeats > 1000))
    return wire_error{error_kind::malformed, "'repeats' must be in [1, 1000]"};
  if (needs & need_hello && !seen.version_list)
    return missing("versions");
  if (needs & (need_hello | need_attach)) {
    if (!seen.model)
      return missing("model");
    if (!seen.block_size)
      return missing("block_size");
  }
  if ((needs & need_attach) && !out.tensors.present)
    return missing("tensors");
  if (out.text.kind != prompt::form::tokens && !out.text.extra_keys.empty())
    return wire_error{error_kind::malformed, "'extra_keys' goes with a 'tokens' prompt only"};
  return std::nullopt;
}

}  // namespace

namespace wire {

std::optional<wire_error> decode_call_objects(const char* data, size_t size, call& out) {
  out = call{};
  msgpack::object_handle handle;
  if (auto error = unpack_map(data, size, handle))
    return error;
  const auto& map = handle.get().via.map;
  seen_keys seen;
  std::optional<wire_error> bad_field;
  try {
    read_id_first(map, out);
    read_keys(map, out, seen);
  } catch (const field_error& e) {
    bad_field = wire_error{error_kind::malformed, e.what()};
  }
  // The verb, when the request named one it knows, even if a field was wrong: its error reply
  // counts under that verb (stats.calls), not under the default.
  std::optional<verb> op = seen.op_name ? verb_of(*seen.op_name) : std::nullopt;
  if (op) {
    out.op = *op;
    out.op_given = true;
  }
  if (bad_field)
    return bad_field;
  if (!seen.op_name)
    return wire_error{error_kind::malformed, "the message has no 'op'"};
  if (!op)
    return wire_error{error_kind::unknown_op, "unknown op '" + *seen.op_name + "'"};
  return check_needs(out, seen);
}

}  // namespace wire

// The object tree costs msgpack-c an object per element, most of the server's decoding of a
// step's block ids (BENCHMARKS.md, "Calls read from their bytes"): the frequent calls skip it.
// Any frame the byte reader does not take, or whose call breaks a verb's requirements, is read
// again through the objects, so that errors are worded in one place.
std::optional<wire_error> decode_call(const char* data, size_t size, call& out) {
  out = call{};
  wire::seen_keys seen;
  if (wire::read_call_bytes(data, size, out, seen) && seen.op_name) {
    if (std::optional<verb> op = verb_of(*seen.op_name)) {
      out.op = *op;
      out.op_given = true;
      if (!check_needs(out, seen))
        return std::nullopt;
    }
  }
  return wire::decode_call_objects(data, size, out);
}

}  // namespace kvtier::serve
