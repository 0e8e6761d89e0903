// Transfer completion: settling a finished transfer's orders, and what a storage load that
// landed or failed means for the request it was for.

#include "model/controller/controller_core.hpp"

#include <algorithm>

namespace kvtier {

void controller_core::on_transfer_done(const transfer_done& d, std::vector<transfer>& out,
                                       std::vector<request_id>& landed) {
  block_event_batch batch(options_.events);
  auto owner = load_owner_.find(d.id);
  std::vector<transfer_order> orders = tracker_.finish(d.id);
  forget_engine_claims(d.id);
  for (const transfer_order& o : orders) {
    auto read = preemption_reads_.find(o.device_block);
    if (o.kind == transfer_kind::backup && read != preemption_reads_.end() && read->second == o.id)
      preemption_reads_.erase(read);
  }
  // The request that a load was for; under best_effort and timeout it may have been admitted,
  // or even have finished, before its loads landed.
  request_state* holder = nullptr;
  if (owner != load_owner_.end()) {
    auto it = requests_.find(owner->second);
    if (it != requests_.end())
      holder = &it->second;
  }
  if (!d.ok) {
    // Only a storage load may fail (the block was evicted between lookup and read): the request
    // goes on without its prefetch, and the nodes that were being filled go.
    invariants_.expect(owner != load_owner_.end(), [&] {
      return "transfer " + std::to_string(d.id) + " failed: " + d.error;
    });
    for (const transfer_order& o : orders)
      model_.fail(o);
    if (owner != load_owner_.end()) {
      if (holder) {
        drop_prefetch_hold(*holder);
        if (!holder->admitted) {
          // Failed, not wasted (failed_loads counts it): none of its blocks is loaded.
          size_t end = std::min<size_t>(holder->prefetch_first + size_t{holder->prefetched},
                                        holder->loaded.size());
          for (size_t i = holder->prefetch_first; i < end; ++i)
            holder->loaded[i] = 0;
          holder->cached_at_ready = holder->prefetch_first;
          holder->prefetched = 0;
        }
      }
      for (auto it = orders.rbegin(); it != orders.rend(); ++it)
        model_.discard_if_bare(it->node, it->generation);
      ++failed_loads_;
    }
  } else {
    // Kept between messages: a list grown order by order from empty reallocates each time.
    std::vector<transfer_order>& follow = follow_orders_;
    follow.clear();
    constexpr size_t ahead = 8;
    for (size_t i = 0; i < std::min(ahead, orders.size()); ++i)
      model_.prefetch(orders[i]);
    for (size_t i = 0; i < orders.size(); ++i) {
      if (i + ahead < orders.size())
        model_.prefetch(orders[i + ahead]);
      model_.complete(orders[i], follow);
    }
    tracker_.batch(follow, out);
  }
  if (owner != load_owner_.end()) {
    if (holder && !holder->admitted) {
      // Landed ahead of its admission: protected up to prefetch_capacity_blocks (always when
      // looked up at the queue's head), else free to go under host pressure (see the header).
      size_t n = holder->prefetch_path.size();
      bool room = protected_blocks_ + n <= options_.prefetch_capacity_blocks
                  || holder->lookup_before_admission;
      if (d.ok && n > 0 && !holder->protected_hold && room) {
        holder->protected_hold = true;
        protected_blocks_ += static_cast<uint32_t>(n);
        ++prefetch_.protected_holds;
      } else if (!holder->protected_hold) {
        drop_prefetch_hold(*holder);
      }
      landed.push_back(owner->second);
    }
    load_owner_.erase(owner);
    release_protected_if_idle();
  }
}

}  // namespace kvtier
