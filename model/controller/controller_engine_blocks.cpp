// Version 3's engine-owned device tier (docs/protocol.md): the engine's KV cache manager names
// the device block of every position of a request's table. The controller keeps deciding on its
// own pool (so that its hits are a replay's), and its copies address the engine's blocks: in
// real mode the transfer engine writes and reads the engine's tensors at those ids.
//
// The engine hands an id out again on its own terms (a freed block, an evicted cached one),
// while a copy of kvtier's may still read it: a backup of the block a finished request computed
// last, a write-back. Two orders keep such a block's bytes: a copy that reads an engine block
// runs before a later copy writes it (a swap-in into the same id; within one commit the reading
// copies are sent first), and the step whose admissions or growths name the id again is granted
// only once every copy reading it has finished, so that the engine computes into it after.
//
// The other way round, in real mode (options_.grant_early): the engine computes a step's KV
// after the step's reply, so a copy reading a block the step computes into (a backup of a block
// its admission or growth completes) must not run before that forward. Such reads, and the
// copies that wait for them, are held back and sent first with the next commit, when the
// server fences reads on the forward of this step (docs/protocol.md, "Saves"); they are no
// barrier of this step, which would wait for itself.

#include <algorithm>

#include "model/controller/controller_core.hpp"

namespace kvtier {

namespace {

constexpr uint32_t unnamed = UINT32_MAX;

bool reads_engine(transfer_kind k) {
  return k == transfer_kind::backup || k == transfer_kind::write_back;
}

bool writes_engine(transfer_kind k) {
  return k == transfer_kind::swap_in || k == transfer_kind::fill;
}

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
  engine_named_.insert(engine_named_.end(), ids.begin(), ids.end());
  engine_written_.insert(ids.begin(), ids.end());
  // A growth's first tokens go into the block it already had, unless that one is full.
  if (from > 0 && from - 1 < r.table.size() && r.table[from - 1] < engine_blocks_.size()
      && engine_blocks_[r.table[from - 1]] != unnamed)
    engine_written_.insert(engine_blocks_[r.table[from - 1]]);
}

void controller_core::to_engine_blocks(std::vector<transfer>& out, size_t first,
                                       std::vector<uint64_t>& barriers) {
  // A write-back reads what an evicted block held before this step (its old id, where this
  // step's admissions named the block again); a backup reads what the block holds now, its
  // content adopted this step included (its new id).
  auto engine_id = [&](block_id b, bool old) {
    uint32_t id = b < engine_blocks_.size() ? engine_blocks_[b] : unnamed;
    if (old)
      if (auto it = engine_blocks_before_.find(b); it != engine_blocks_before_.end())
        id = it->second;
    return id == unnamed ? b : id;
  };
  if (!engine_blocks_.empty()) {
    std::vector<uint64_t> fresh_reads;  // reads of what this step computes
    for (size_t i = first; i < out.size(); ++i) {
      transfer& t = out[i];
      bool reads = reads_engine(t.kind);
      if (!reads && !writes_engine(t.kind))
        continue;
      bool fresh = false;
      bool old = t.kind == transfer_kind::write_back;
      for (block_move& m : t.blocks) {
        bool renamed = old && engine_blocks_before_.count(m.device_block) > 0;
        m.device_block = engine_id(m.device_block, old);
        fresh = fresh || (reads && !renamed && engine_written_.count(m.device_block) > 0);
      }
      if (fresh)
        fresh_reads.push_back(t.id);
    }
    order_engine_reads(out, first);
    if (options_.grant_early)
      hold_fresh_reads(out, first, fresh_reads);
    for (size_t i = first; i < out.size(); ++i)
      claim_engine_blocks(out[i]);
    // The engine computes into the ids it named this step once the copies reading them end.
    for (uint32_t id : engine_named_)
      if (auto u = engine_users_.find(id); u != engine_users_.end())
        barriers.insert(barriers.end(), u->second.readers.begin(), u->second.readers.end());
  }
  engine_blocks_before_.clear();
  engine_named_.clear();
  engine_written_.clear();
}

// Real mode: sends the reads held back by the last commit first (the server fences them on its
// forward), and holds back this commit's reads of what its step computes, with every copy that
// waits for one of them. A swap-in is never held (the step's reply waits for it): where one
// would be, nothing is held.
void controller_core::hold_fresh_reads(std::vector<transfer>& out, size_t first,
                                       const std::vector<uint64_t>& fresh_reads) {
  std::vector<transfer> keep, held;
  absl::flat_hash_set<uint64_t> held_ids(fresh_reads.begin(), fresh_reads.end());
  bool swap_in_held = false;
  for (size_t i = first; i < out.size(); ++i) {
    transfer& t = out[i];
    bool hold = held_ids.count(t.id) > 0;
    for (uint64_t dep : t.after)
      hold = hold || held_ids.count(dep) > 0;
    if (hold) {
      held_ids.insert(t.id);
      swap_in_held = swap_in_held || t.kind == transfer_kind::swap_in;
    }
    (hold ? held : keep).push_back(std::move(t));
  }
  out.resize(first);
  out.insert(out.end(), std::make_move_iterator(engine_held_.begin()),
             std::make_move_iterator(engine_held_.end()));
  engine_held_.clear();
  out.insert(out.end(), std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
  if (swap_in_held) {  // the step's reply waits for its swap-in: send everything in order
    out.insert(out.end(), std::make_move_iterator(held.begin()),
               std::make_move_iterator(held.end()));
    return;
  }
  engine_held_ = std::move(held);
}

// A commit's copies that read engine blocks go before its swap-in, which may write the same ids
// (an id the engine freed and named again for an admission): their bytes are the old owner's.
// Kept as they are where a reading copy already waits for a later one (a host block it writes
// that the swap-in reads): then the ids cannot clash, the controller never frees a host block
// a swap-in of the same commit still reads.
void controller_core::order_engine_reads(std::vector<transfer>& out, size_t first) {
  auto rank = [](const transfer& t) {
    return t.kind == transfer_kind::fill ? 0 : reads_engine(t.kind) ? 1 : 2;
  };
  std::vector<transfer> sorted(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const transfer& a, const transfer& b) { return rank(a) < rank(b); });
  for (size_t i = 0; i < sorted.size(); ++i)
    for (uint64_t dep : sorted[i].after)
      for (size_t j = i + 1; j < sorted.size(); ++j)
        if (sorted[j].id == dep)
          return;  // a copy would come before one it waits for: keep the batch's order
  std::move(sorted.begin(), sorted.end(), out.begin() + static_cast<std::ptrdiff_t>(first));
}

// Orders `t` after the copies in flight that touch its engine blocks the other way (a read
// after a write, a write after reads and a write), as transfer_tracker orders the controller's
// own blocks, and records its claims until it ends.
void controller_core::claim_engine_blocks(transfer& t) {
  bool reads = reads_engine(t.kind);
  if (!reads && !writes_engine(t.kind))
    return;
  auto depend = [&](uint64_t id) {
    if (id != 0 && id != t.id && std::find(t.after.begin(), t.after.end(), id) == t.after.end())
      t.after.push_back(id);
  };
  std::vector<uint32_t>& touched = engine_touched_[t.id];
  for (const block_move& m : t.blocks) {
    engine_users& u = engine_users_[m.device_block];
    depend(u.writer);
    if (reads) {
      u.readers.push_back(t.id);
    } else {
      for (uint64_t r : u.readers)
        depend(r);
      u.readers.clear();
      u.writer = t.id;
    }
    touched.push_back(m.device_block);
  }
  std::sort(t.after.begin(), t.after.end());
}

void controller_core::forget_engine_claims(uint64_t transfer) {
  auto it = engine_touched_.find(transfer);
  if (it == engine_touched_.end())
    return;
  for (uint32_t id : it->second) {
    auto u = engine_users_.find(id);
    if (u == engine_users_.end())
      continue;
    if (u->second.writer == transfer)
      u->second.writer = 0;
    auto& r = u->second.readers;
    r.erase(std::remove(r.begin(), r.end(), transfer), r.end());
    if (u->second.writer == 0 && r.empty())
      engine_users_.erase(u);
  }
  engine_touched_.erase(it);
}

}  // namespace kvtier
