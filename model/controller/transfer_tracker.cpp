#include "model/controller/transfer_tracker.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "model/storage/storage_index.hpp"

namespace kvtier {

uint64_t transfer_tracker::storage_key_of(block_hash h) const {
  return make_storage_key(namespace_, h);
}

void transfer_tracker::grow(std::vector<block_users>& v, block_id b) {
  v.resize(std::max<size_t>(b + 1, v.size() * 2));
}

void transfer_tracker::reserve(uint32_t device_blocks, uint32_t host_blocks) {
  if (device_.size() < device_blocks)
    device_.resize(device_blocks);
  if (host_.size() < host_blocks)
    host_.resize(host_blocks);
  if (host_written_in_.size() < host_blocks)
    host_written_in_.resize(host_blocks);
}

void transfer_tracker::batch(const std::vector<transfer_order>& orders, std::vector<transfer>& out) {
  // One transfer per kind, in group_kinds' order (transfer_tracker.hpp says why).
  group_by_kind(orders);
  for (int k = 0; k < group_count; ++k) {
    const std::vector<transfer_order>& group = groups_[k];
    if (group.empty())
      continue;
    // The block entries are scattered: each order's are loaded a few orders ahead (all of a
    // step's hundreds at once would only stall on the loads in flight).
    constexpr size_t ahead = 8;
    auto prefetch = [&](size_t i) {
      if (i >= group.size())
        return;
      if (group[i].device_block < device_.size())
        __builtin_prefetch(&device_[group[i].device_block]);
      if (group[i].host_block < host_.size())
        __builtin_prefetch(&host_[group[i].host_block]);
    };
    for (size_t i = 0; i < ahead; ++i)
      prefetch(i);
    size_t first = 0;
    while (first < group.size()) {
      // A transfer's copies run in any order, so a block it writes must not be touched by
      // another of its orders (a host block freed and handed out again within one commit):
      // such an order starts the next transfer, which comes after this one.
      transfer t;
      t.id = next_id_++;
      t.kind = group_kinds[k];
      t.blocks.reserve(group.size() - first);  // one allocation for a step's hundreds of blocks
      size_t end = first;
      for (; end < group.size() && !touches_own_writes(group[end], t.id); ++end) {
        prefetch(end + ahead);
        const transfer_order& o = group[end];
        // Only storage reads and writes name the block in storage (a key is an XXH3 hash).
        const bool storage = o.kind == transfer_kind::store || o.kind == transfer_kind::load;
        t.blocks.push_back(
          {o.device_block, o.host_block, o.hash, storage ? storage_key_of(o.hash) : 0});
        add_dependencies(t, o);
      }
      std::sort(t.after.begin(), t.after.end());
      orders_.emplace(t.id, std::vector<transfer_order>(group.begin() + static_cast<long>(first),
                                                        group.begin() + static_cast<long>(end)));
      out.push_back(std::move(t));
      first = end;
    }
  }
}

// The orders into groups_ in batch()'s kind order. A store goes first unless an earlier order of
// the batch writes its host block: the marks are kept only when the batch has a store to place.
void transfer_tracker::group_by_kind(const std::vector<transfer_order>& orders) {
  for (auto& g : groups_)
    g.clear();
  bool stores = std::any_of(orders.begin(), orders.end(), [](const transfer_order& o) {
    return o.kind == transfer_kind::store;
  });
  ++batch_number_;
  auto written = [&](block_id b) {
    return b < host_written_in_.size() && host_written_in_[b] == batch_number_;
  };
  for (const auto& o : orders) {
    if (o.kind == transfer_kind::store) {
      groups_[written(o.host_block) ? 5 : 0].push_back(o);
      continue;
    }
    if (stores && o.kind != transfer_kind::swap_in) {  // every other kind writes its host block
      if (o.host_block >= host_written_in_.size())
        host_written_in_.resize(std::max<size_t>(o.host_block + 1, 2 * host_written_in_.size()));
      host_written_in_[o.host_block] = batch_number_;
    }
    for (int k = 1; k < group_count - 1; ++k)
      if (o.kind == group_kinds[k])
        groups_[k].push_back(o);
  }
}

bool transfer_tracker::touches_own_writes(const transfer_order& o, uint64_t id) {
  auto written = [&](std::vector<block_users>& v, block_id b) {
    return b < v.size() && v[b].writer == id;
  };
  auto read = [&](std::vector<block_users>& v, block_id b) {
    if (b >= v.size())
      return false;
    const auto& r = v[b].readers;
    return std::find(r.begin(), r.end(), id) != r.end();
  };
  switch (o.kind) {
    case transfer_kind::backup:
    case transfer_kind::write_back:
      return written(device_, o.device_block) || written(host_, o.host_block)
             || read(host_, o.host_block);
    case transfer_kind::swap_in:
      return written(host_, o.host_block) || written(device_, o.device_block)
             || read(device_, o.device_block);
    case transfer_kind::load:
      return written(host_, o.host_block) || read(host_, o.host_block);
    case transfer_kind::store:
      return written(host_, o.host_block);
    case transfer_kind::fill:  // fill() claims its blocks as swap-in targets
      KVTIER_ASSERT(false);
  }
  return false;
}

void transfer_tracker::fill(const std::vector<block_move>& blocks, std::vector<transfer>& out) {
  transfer t;
  t.id = next_id_++;
  t.kind = transfer_kind::fill;
  t.blocks = blocks;
  std::vector<transfer_order> writes;
  for (const block_move& b : blocks) {
    transfer_order o;
    o.kind = transfer_kind::swap_in;  // writes the device block, like a swap-in's target
    o.device_block = b.device_block;
    KVTIER_ASSERT(!touches_own_writes(o, t.id));  // each computed block once
    add_dependencies(t, o);
    writes.push_back(o);
  }
  std::sort(t.after.begin(), t.after.end());
  // Nothing in the cache model waits for it, so it carries no orders; finish() forgets its
  // block claims by walking these pseudo-orders.
  fills_.emplace(t.id, std::move(writes));
  out.push_back(std::move(t));
}

void transfer_tracker::add_dependencies(transfer& t, const transfer_order& o) {
  auto depend = [&](uint64_t id) {
    if (id != 0 && std::find(t.after.begin(), t.after.end(), id) == t.after.end())
      t.after.push_back(id);
  };
  auto writes = [&](block_users& u) {
    depend(u.writer);
    for (uint64_t r : u.readers)
      depend(r);
    u.writer = t.id;
    u.readers.clear();
  };
  auto reads = [&](block_users& u) {
    depend(u.writer);
    u.readers.push_back(t.id);
  };
  switch (o.kind) {
    case transfer_kind::backup:
    case transfer_kind::write_back:
      reads(slot(device_, o.device_block));
      writes(slot(host_, o.host_block));
      break;
    case transfer_kind::swap_in:
      reads(slot(host_, o.host_block));
      writes(slot(device_, o.device_block));
      break;
    case transfer_kind::load:
      writes(slot(host_, o.host_block));
      break;
    case transfer_kind::store:
      reads(slot(host_, o.host_block));
      break;
    case transfer_kind::fill:
      KVTIER_ASSERT(false);
  }
}

void transfer_tracker::users_of_device(block_id block, std::vector<uint64_t>& out) const {
  if (block >= device_.size())
    return;
  const block_users& u = device_[block];
  if (u.writer != 0)
    out.push_back(u.writer);
  out.insert(out.end(), u.readers.begin(), u.readers.end());
}

std::vector<transfer_order> transfer_tracker::finish(uint64_t id) {
  std::vector<transfer_order> orders;
  bool fill = false;
  if (auto f = fills_.find(id); f != fills_.end()) {
    orders = std::move(f->second);
    fills_.erase(f);
    fill = true;
  } else {
    auto it = orders_.find(id);
    KVTIER_ASSERT(it != orders_.end());
    orders = std::move(it->second);
    orders_.erase(it);
  }
  auto forget = [&](std::vector<block_users>& v, block_id b) {
    block_users& u = v[b];
    if (u.writer == id)
      u.writer = 0;
    auto& readers = u.readers;
    if (readers.size() == 1) {  // most blocks have one reader at most: no search, no shift
      if (readers[0] == id)
        readers.clear();
      return;
    }
    readers.erase(std::remove(readers.begin(), readers.end(), id), readers.end());
  };
  // The block entries are scattered: the next few are prefetched.
  auto prefetch = [&](const transfer_order& o) {
    bool device = o.kind != transfer_kind::load && o.kind != transfer_kind::store;
    if (device && o.device_block < device_.size())
      __builtin_prefetch(&device_[o.device_block]);
    if (o.host_block < host_.size())
      __builtin_prefetch(&host_[o.host_block]);
  };
  constexpr size_t ahead = 8;
  for (size_t i = 0; i < std::min(ahead, orders.size()); ++i)
    prefetch(orders[i]);
  for (size_t i = 0; i < orders.size(); ++i) {
    const transfer_order& o = orders[i];
    if (i + ahead < orders.size())
      prefetch(orders[i + ahead]);
    if (o.kind != transfer_kind::load && o.kind != transfer_kind::store)
      forget(device_, o.device_block);
    if (!fill)
      forget(host_, o.host_block);
  }
  if (fill)
    orders.clear();
  return orders;
}

}  // namespace kvtier
