#pragma once

// Turns the cache model's transfer orders into batched transfers for the transfer engine, and
// orders them safely. A transfer writes its destination blocks and reads its sources; it must
// start after every earlier outstanding transfer that writes a block it touches, and after every
// earlier reader of a block it writes (so a block is never overwritten while a copy still reads
// it: the reuse-before-D2H-completes hazard). Dependencies only point backwards, so they never
// deadlock.

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include "model/cache/cache_model.hpp"
#include "model/messages.hpp"

namespace kvtier {

class transfer_tracker {
 public:
  /// `storage_namespace` names every block's storage key.
  explicit transfer_tracker(uint64_t storage_namespace) : namespace_(storage_namespace) {}

  /// Makes room for the users of `device_blocks` and `host_blocks` blocks up front (a grown
  /// table is copied whole under the step that grew it).
  void reserve(uint32_t device_blocks, uint32_t host_blocks);
  /// Groups `orders` by kind into transfers (appended to `out`), in a fixed kind order; a kind
  /// takes more than one transfer only where its orders touch a block one of them writes.
  void batch(const std::vector<transfer_order>& orders, std::vector<transfer>& out);
  /// A fill transfer (--verify): marks computed device blocks with their patterns; later copies
  /// reading those blocks follow it.
  void fill(const std::vector<block_move>& blocks, std::vector<transfer>& out);
  /// Outstanding transfers that touch device `block` (what writing it must wait for).
  void users_of_device(block_id block, std::vector<uint64_t>& out) const;
  /// A transfer is done: returns its orders (to complete in the model) and forgets it.
  std::vector<transfer_order> finish(uint64_t id);
  size_t outstanding_count() const { return orders_.size() + fills_.size(); }
  uint64_t issued() const { return next_id_ - 1; }
  uint64_t storage_key_of(block_hash h) const;

 private:
  struct block_users {
    uint64_t writer = 0;
    absl::InlinedVector<uint64_t, 2> readers;
  };
  void add_dependencies(transfer& t, const transfer_order& o);
  /// Whether `o` touches a block that transfer `id` writes, or writes one that it reads.
  bool touches_own_writes(const transfer_order& o, uint64_t id);
  // Called for each block of every order: the growth, rare, stays out of line.
  static block_users& slot(std::vector<block_users>& v, block_id b) {
    if (b >= v.size()) [[unlikely]]
      grow(v, b);
    return v[b];
  }
  [[gnu::noinline]] static void grow(std::vector<block_users>& v, block_id b);

  uint64_t namespace_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, std::vector<transfer_order>> orders_;
  absl::flat_hash_map<uint64_t, std::vector<transfer_order>> fills_;  // pseudo-orders: claims
  std::vector<block_users> device_, host_;  // by block id, grown on demand
  void group_by_kind(const std::vector<transfer_order>& orders);

  // batch()'s transfers, in order: stores of host copies no earlier order of the batch writes
  // (a host block evicted to storage and handed out again in the same commit: the store reads
  // the old copy before the load or backup reusing it writes), write-backs (reused blocks wait
  // for them), swap-ins (the step waits for them), backups, loads, then the stores of host
  // blocks the batch itself writes first.
  static constexpr int group_count = 6;
  static constexpr transfer_kind group_kinds[group_count] = {
    transfer_kind::store, transfer_kind::write_back, transfer_kind::swap_in,
    transfer_kind::backup, transfer_kind::load, transfer_kind::store};
  std::vector<transfer_order> groups_[group_count];  // scratch: orders by kind, as group_kinds
  // Host blocks the batch writes so far: by host block, the number of the last batch that
  // wrote it (a hash set cleared per batch gave back its table and regrew it every step).
  std::vector<uint64_t> host_written_in_;
  uint64_t batch_number_ = 0;
};

}  // namespace kvtier
