// Version 3's engine-owned device tier (docs/protocol.md): the engine's KV cache manager names
// the device block of every position of a request's table. The controller keeps deciding on its
// own pool (so that its hits are a replay's), and its copies address the engine's blocks: in
// real mode the transfer engine writes and reads the engine's tensors at those ids.

#include "model/controller/controller_core.hpp"

namespace kvtier {

namespace {

constexpr uint32_t unnamed = UINT32_MAX;

}  // namespace

void controller_core::note_engine_blocks(const request_state& r,
                                         const std::vector<uint32_t>& ids, size_t from) {
  for (size_t j = from; j < r.table.size() && j - from < ids.size(); ++j) {
    block_id b = r.table[j];
    if (engine_blocks_.size() <= b)
      engine_blocks_.resize(size_t{b} + 1, unnamed);
    engine_blocks_before_.try_emplace(b, engine_blocks_[b]);
    engine_blocks_[b] = ids[j - from];
  }
}

void controller_core::to_engine_blocks(std::vector<transfer>& out, size_t first) {
  auto engine_id = [&](block_id b, bool reads) {
    uint32_t id = b < engine_blocks_.size() ? engine_blocks_[b] : unnamed;
    if (reads)  // a backup or write-back reads what the block held before this step
      if (auto it = engine_blocks_before_.find(b); it != engine_blocks_before_.end())
        id = it->second;
    return id == unnamed ? b : id;
  };
  if (!engine_blocks_.empty())
    for (size_t i = first; i < out.size(); ++i) {
      transfer& t = out[i];
      bool reads = t.kind == transfer_kind::backup || t.kind == transfer_kind::write_back;
      if (!reads && t.kind != transfer_kind::swap_in && t.kind != transfer_kind::fill)
        continue;
      for (block_move& m : t.blocks)
        m.device_block = engine_id(m.device_block, reads);
    }
  engine_blocks_before_.clear();
}

}  // namespace kvtier
