// The call encoder (docs/protocol.md, "Verbs"): the inverse of decode_call, field for field.
// Each verb's fields in one list, so that the map's count and its entries cannot disagree.

#include <functional>

#include "serve/wire/call.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

namespace {

using field = std::function<void(map_writer&)>;

// [[req, tokens], ...], or [[req, tokens, [block id]], ...] when every entry has its ids.
field marks(const char* key, const std::vector<token_mark>& list,
            const std::vector<std::vector<uint32_t>>* ids = nullptr) {
  bool with_ids = ids && !list.empty() && ids->size() == list.size();
  return [=, &list](map_writer& w) {
    auto& pk = w.key(key);
    pk.pack_array(static_cast<uint32_t>(list.size()));
    for (size_t i = 0; i < list.size(); ++i) {
      pk.pack_array(with_ids ? 3 : 2);
      pk.pack(list[i].req);
      pk.pack(list[i].tokens);
      if (with_ids)
        pk.pack((*ids)[i]);
    }
  };
}

template <class T>
field value(const char* key, const T& v) {
  return [key, &v](map_writer& w) { w.put(key, v); };
}

void prompt_fields(const prompt& p, std::vector<field>& out) {
  switch (p.kind) {
    case prompt::form::tokens:
      out.push_back(value("tokens", p.tokens));
      if (!p.extra_keys.empty())
        out.push_back(value("extra_keys", p.extra_keys));
      return;
    case prompt::form::hashes:
      out.push_back([&p](map_writer& w) {
        auto& pk = w.key("hashes");
        pk.pack_array(static_cast<uint32_t>(p.blocks.size()));
        for (const cache_block& b : p.blocks)
          pk.pack(b.hash);
      });
      return;
    case prompt::form::blocks:
      out.push_back([&p](map_writer& w) { put_blocks(w, p.blocks); });
      return;
    case prompt::form::none:
      return;
  }
}

void write_model(map_writer& w, const model_shape& model) {
  w.key("model");
  bool parts = model.kv_lora_rank > 0;
  map_writer m(w.buffer(), 5 + (model.latent_dim > 0 ? 1 : 0) + (parts ? 2 : 0));
  m.put_str("name", model.name);
  m.put("layers", model.layers);
  m.put("kv_heads", model.kv_heads);
  m.put("head_dim", model.head_dim);
  m.put_str("kv_dtype", model.kv_dtype);
  if (model.latent_dim > 0)
    m.put("latent_dim", model.latent_dim);
  if (parts) {
    m.put("kv_lora_rank", model.kv_lora_rank);
    m.put("rope_head_dim", model.rope_head_dim);
  }
}

void write_handle(msgpack::packer<msgpack::sbuffer>& pk, const ipc_bytes& h) {
  pk.pack_bin(ipc_handle_size);
  pk.pack_bin_body(reinterpret_cast<const char*>(h.data()), ipc_handle_size);
}

// As read_tensors reads it: `memory` and the strides only when not the defaults.
void write_tensors(map_writer& w, const attach_request& t) {
  w.key("tensors");
  bool shm = t.memory == tensor_memory::shm;
  uint32_t n = 4 + (shm ? 1 : 0) + (t.half_stride ? 1 : 0) + (t.block_stride ? 1 : 0);
  map_writer m(w.buffer(), n);
  if (shm)
    m.put_str("memory", "shm");
  m.put("device_blocks", t.device_blocks);
  auto& layers = m.key("layers");
  layers.pack_array(static_cast<uint32_t>(t.layer_offsets.size()));
  for (size_t l = 0; l < t.layer_offsets.size(); ++l) {
    layers.pack_array(2);
    if (shm) {
      const std::string& s = t.layer_segments.at(l);
      layers.pack_str(static_cast<uint32_t>(s.size()));
      layers.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
    } else {
      write_handle(layers, t.layer_handles.at(l));
    }
    layers.pack(t.layer_offsets[l]);
  }
  if (t.half_stride)
    m.put("half_stride", t.half_stride);
  if (t.block_stride)
    m.put("block_stride", t.block_stride);
  m.put("event_slots", t.event_slots);
  if (shm) {
    m.put_str("signals", t.signals);
    return;
  }
  auto& events = m.key("events");
  events.pack_array(static_cast<uint32_t>(t.events.size()));
  for (const ipc_bytes& e : t.events)
    write_handle(events, e);
}

void hello_fields(const call& c, std::vector<field>& out) {
  out.push_back(value("versions", c.versions));
  out.push_back([&c](map_writer& w) { w.put_str("name", c.name); });
  out.push_back([&c](map_writer& w) { write_model(w, c.model); });
  out.push_back(value("block_size", c.block_size));
  if (!c.tiers.empty())
    out.push_back(value("tiers", c.tiers));
  if (!c.config.empty())
    out.push_back([&c](map_writer& w) {
      w.key("config");
      map_writer m(w.buffer(), static_cast<uint32_t>(c.config.size()));
      for (const auto& [key, text] : c.config)
        m.put_str(key.c_str(), text);
    });
  if (c.tensors.present)
    out.push_back([&c](map_writer& w) { write_tensors(w, c.tensors); });
}

void step_fields(const call& c, std::vector<field>& out) {
  const commit& s = c.step;
  out.push_back(value("step", s.step));
  out.push_back(marks("computed", s.computed));
  out.push_back(value("finished", s.finished));
  out.push_back(marks("preempted", s.preempted));
  out.push_back(marks("grows", s.grows, &s.grow_blocks));
  out.push_back(marks("admits", s.admits, &s.admit_blocks));
  if (!c.evicted.empty())
    out.push_back(value("evicted", c.evicted));
}

std::vector<field> fields_of(const call& c) {
  std::vector<field> out;
  switch (c.op) {
    case verb::hello: hello_fields(c, out); break;
    case verb::lookup:
      prompt_fields(c.text, out);
      if (c.computed_tokens != 0)
        out.push_back(value("computed_tokens", c.computed_tokens));
      break;
    case verb::allocate:
      out.push_back(value("req", c.req));
      prompt_fields(c.text, out);
      break;
    case verb::wait: case verb::free: case verb::finish:
      out.push_back(value("req", c.req));
      break;
    case verb::commit: case verb::save: case verb::preempt:
      out.push_back(value("req", c.req));
      out.push_back(value("tokens", c.tokens));
      break;
    case verb::probe:
      out.push_back(value("step", c.probe.step));
      out.push_back(value("candidates", c.probe.candidates));
      out.push_back(value("grow_blocks", c.probe.grow_blocks));
      out.push_back(value("victims", c.probe.victims));
      break;
    case verb::step: step_fields(c, out); break;
    case verb::bench_swap:
      out.push_back(value("blocks", c.blocks));
      out.push_back(value("repeats", c.repeats));
      break;
    case verb::attach:
      out.push_back([&c](map_writer& w) { write_model(w, c.model); });
      out.push_back(value("block_size", c.block_size));
      out.push_back([&c](map_writer& w) { write_tensors(w, c.tensors); });
      break;
    case verb::stats: case verb::ping: case verb::bye: break;
  }
  return out;
}

}  // namespace

void encode_call(msgpack::sbuffer& buf, const call& c) {
  buf.clear();
  std::vector<field> fields = fields_of(c);
  uint32_t n = 2 + (c.token ? 1 : 0) + (c.engine ? 1 : 0) + static_cast<uint32_t>(fields.size());
  map_writer w(buf, n);
  w.put_str("op", verb_name(c.op));
  w.put("id", c.id);
  if (c.token)
    w.put_str("token", *c.token);
  if (c.engine)
    w.put("engine", *c.engine);
  for (const field& f : fields)
    f(w);
}

}  // namespace kvtier::serve
