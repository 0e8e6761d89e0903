#include "observe/events/event_encoding.hpp"

#include <msgpack.hpp>

#include "model/cache/radix_tree.hpp"

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

std::vector<wire_run> runs_of(const std::vector<block_event>& events) {
  std::vector<wire_run> runs;
  for (size_t i = 0; i < events.size(); ++i) {
    if (!runs.empty()) {
      wire_run& r = runs.back();
      if (continues(events[r.first + r.count - 1], events[r.first], events[i])) {
        ++r.count;
        continue;
      }
    }
    runs.push_back({i, 1});
  }
  return runs;
}

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_key(packer& p, const char* key) {
  p.pack(std::string(key));
}

void pack_hashes(packer& p, const std::vector<block_event>& events, const wire_run& r) {
  p.pack_array(static_cast<uint32_t>(r.count));
  for (size_t i = r.first; i < r.first + r.count; ++i)
    p.pack_uint64(events[i].hash);
}

void pack_event(packer& p, const std::vector<block_event>& events, const wire_run& r) {
  const block_event& e = events[r.first];
  switch (e.kind) {
    case block_event_kind::stored:
      p.pack_map(8);
      pack_key(p, "type");
      p.pack(std::string("BlockStored"));
      pack_key(p, "block_hashes");
      pack_hashes(p, events, r);
      pack_key(p, "parent_block_hash");
      if (e.parent)
        p.pack_uint64(*e.parent);
      else
        p.pack_nil();
      // The index keeps hashes, not tokens: consumers key on block_hashes.
      pack_key(p, "token_ids");
      p.pack_array(0);
      pack_key(p, "block_size");
      p.pack_uint32(e.tokens);
      pack_key(p, "lora_id");
      p.pack_nil();
      pack_key(p, "medium");
      p.pack(std::string(to_string(e.where)));
      pack_key(p, "lora_name");
      p.pack_nil();
      return;
    case block_event_kind::removed:
      p.pack_map(3);
      pack_key(p, "type");
      p.pack(std::string("BlockRemoved"));
      pack_key(p, "block_hashes");
      pack_hashes(p, events, r);
      pack_key(p, "medium");
      p.pack(std::string(to_string(e.where)));
      return;
    case block_event_kind::cleared:
      p.pack_map(1);
      pack_key(p, "type");
      p.pack(std::string("AllBlocksCleared"));
      return;
  }
}

}  // namespace

size_t wire_event_count(const std::vector<block_event>& events) {
  return runs_of(events).size();
}

std::string encode_event_batch(const event_batch_header& header,
                               const std::vector<block_event>& events) {
  std::vector<wire_run> runs = runs_of(events);
  msgpack::sbuffer buffer;
  packer p(buffer);
  p.pack_map(header.data_parallel_rank ? 3 : 2);
  pack_key(p, "ts");
  p.pack_double(header.ts);
  pack_key(p, "events");
  p.pack_array(static_cast<uint32_t>(runs.size()));
  for (const wire_run& r : runs)
    pack_event(p, events, r);
  if (header.data_parallel_rank) {
    pack_key(p, "data_parallel_rank");
    p.pack_int64(*header.data_parallel_rank);
  }
  return std::string(buffer.data(), buffer.size());
}

}  // namespace kvtier
