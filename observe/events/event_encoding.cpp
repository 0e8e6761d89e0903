#include "observe/events/event_encoding.hpp"

#include <cstring>

#include <msgpack.hpp>

namespace kvtier {

namespace {

// A run of events that travels as one wire event.
struct wire_run {
  size_t first = 0;
  size_t count = 0;
};

bool continues(const block_event& run_last, const block_event& run_first, const block_event& e) {
  if (e.kind != run_first.kind || e.where != run_first.where)
    return false;
  if (e.kind == block_event_kind::removed)
    return true;
  if (e.kind == block_event_kind::stored)
    return e.tokens == run_first.tokens && e.parent == std::optional<block_hash>(run_last.hash);
  return false;  // each clear stands alone
}

std::vector<wire_run> runs_of(const std::vector<published_event>& events) {
  std::vector<wire_run> runs;
  for (size_t i = 0; i < events.size(); ++i) {
    if (!runs.empty()) {
      wire_run& r = runs.back();
      if (continues(events[r.first + r.count - 1].block, events[r.first].block,
                    events[i].block)) {
        ++r.count;
        continue;
      }
    }
    runs.push_back({i, 1});
  }
  return runs;
}

using packer = msgpack::packer<msgpack::sbuffer>;

// msgpack-c writes a double with an integral value as an integer; vLLM's EventBatch.ts is a
// float64 on the wire, whatever its value.
void pack_float64(msgpack::sbuffer& buffer, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  char out[9] = {static_cast<char>(0xcb)};
  for (int i = 0; i < 8; ++i)
    out[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xff);
  buffer.write(out, sizeof out);
}

// Writes an event's fields: its key first in the map layout, its value alone in the array layout.
class fields_writer {
 public:
  fields_writer(packer& p, event_layout layout) : p_(p), layout_(layout) {}
  /// Starts an event of `n` fields, its tag counted.
  void begin(uint32_t n) {
    if (layout_ == event_layout::map)
      p_.pack_map(n);
    else
      p_.pack_array(n);
  }
  packer& field(const char* key) {
    if (layout_ == event_layout::map)
      p_.pack(std::string(key));
    return p_;
  }

 private:
  packer& p_;
  event_layout layout_;
};

void pack_hashes(packer& p, const std::vector<published_event>& events, const wire_run& r) {
  p.pack_array(static_cast<uint32_t>(r.count));
  for (size_t i = r.first; i < r.first + r.count; ++i)
    p.pack_uint64(events[i].block.hash);
}

// Every block's tokens in order: block_size of them per hash, as consumers slice them.
void pack_token_ids(packer& p, const std::vector<published_event>& events, const wire_run& r) {
  uint32_t per_block = events[r.first].block.tokens;
  p.pack_array(static_cast<uint32_t>(r.count) * per_block);
  for (size_t i = r.first; i < r.first + r.count; ++i) {
    const published_event& e = events[i];
    std::vector<int32_t> placeholder;
    const std::vector<int32_t>* tokens = &e.token_ids;
    if (tokens->size() != per_block) {
      placeholder = placeholder_tokens(e.block.hash, per_block);
      tokens = &placeholder;
    }
    for (int32_t t : *tokens)
      p.pack_int32(t);
  }
}

// The event's tag and fields in vLLM's declaration order, each field that has no default in
// vLLM's structs (so that a strict map decoder finds every required key): BlockStored's lora_id
// and lora_name are nil (adapters are mixed into the hash as extra keys).
void pack_event(packer& p, event_layout layout, const std::vector<published_event>& events,
                const wire_run& r) {
  const block_event& e = events[r.first].block;
  fields_writer w(p, layout);
  switch (e.kind) {
    case block_event_kind::stored:
      w.begin(8);
      w.field("type").pack(std::string("BlockStored"));
      pack_hashes(w.field("block_hashes"), events, r);
      if (e.parent)
        w.field("parent_block_hash").pack_uint64(*e.parent);
      else
        w.field("parent_block_hash").pack_nil();
      pack_token_ids(w.field("token_ids"), events, r);
      w.field("block_size").pack_uint32(e.tokens);
      w.field("lora_id").pack_nil();
      w.field("medium").pack(std::string(medium_name(e.where)));
      w.field("lora_name").pack_nil();
      return;
    case block_event_kind::removed:
      w.begin(3);
      w.field("type").pack(std::string("BlockRemoved"));
      pack_hashes(w.field("block_hashes"), events, r);
      w.field("medium").pack(std::string(medium_name(e.where)));
      return;
    case block_event_kind::cleared:
      w.begin(1);
      w.field("type").pack(std::string("AllBlocksCleared"));
      return;
  }
}

}  // namespace

const char* to_string(event_layout layout) {
  return layout == event_layout::array ? "array" : "map";
}

std::optional<event_layout> event_layout_of(const std::string& name) {
  if (name == "array")
    return event_layout::array;
  if (name == "map")
    return event_layout::map;
  return std::nullopt;
}

const char* medium_name(tier t) {
  constexpr per_tier<const char*> names = {"GPU", "CPU", "EXTERNAL"};
  return names[index_of(t)];
}

std::vector<int32_t> placeholder_tokens(block_hash hash, uint32_t count) {
  std::vector<int32_t> tokens(count, 0);
  const int32_t parts[3] = {static_cast<int32_t>(hash & 0x7fffffff),
                            static_cast<int32_t>((hash >> 31) & 0x7fffffff),
                            static_cast<int32_t>(hash >> 62)};
  for (uint32_t i = 0; i < count && i < 3; ++i)
    tokens[i] = parts[i];
  return tokens;
}

size_t wire_event_count(const std::vector<published_event>& events) {
  return runs_of(events).size();
}

std::string encode_event_batch(const event_batch_header& header,
                               const std::vector<published_event>& events) {
  std::vector<wire_run> runs = runs_of(events);
  msgpack::sbuffer buffer;
  packer p(buffer);
  // vLLM's EventBatch is array_like in every release: [ts, events, data_parallel_rank].
  p.pack_array(header.data_parallel_rank ? 3 : 2);
  pack_float64(buffer, header.ts);
  p.pack_array(static_cast<uint32_t>(runs.size()));
  for (const wire_run& r : runs)
    pack_event(p, header.layout, events, r);
  if (header.data_parallel_rank)
    p.pack_int64(*header.data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

std::vector<published_event> with_unknown_tokens(const std::vector<block_event>& events) {
  std::vector<published_event> published;
  published.reserve(events.size());
  for (const block_event& e : events)
    published.push_back({e, {}});
  return published;
}

std::string encode_event_batch(const event_batch_header& header,
                               const std::vector<block_event>& events) {
  return encode_event_batch(header, with_unknown_tokens(events));
}

size_t wire_event_count(const std::vector<block_event>& events) {
  return wire_event_count(with_unknown_tokens(events));
}

}  // namespace kvtier
