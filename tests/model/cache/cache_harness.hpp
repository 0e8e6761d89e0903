#pragma once

// A cache_model driven the way the hit-rate replay drives it (sim/hitrate/hitrate_replay.cpp),
// one request at a time with transfers done at once: the cache model's tests share it.

#include <catch2/catch.hpp>

#include <vector>

#include "model/cache/cache_model.hpp"
#include "model/cache/invariants.hpp"

namespace kvtier::test {

inline constexpr uint32_t bs = 16;

inline std::vector<cache_block> blocks_of(const std::vector<uint64_t>& ids) {
  std::vector<cache_block> out;
  map_trace_blocks(1, ids.data(), ids.size(), static_cast<uint32_t>(ids.size()) * bs, bs, bs,
                   out);
  return out;
}

inline cache_options device_only(uint32_t device_blocks) {
  cache_options o;
  o.device_blocks = device_blocks;
  return o;
}

inline cache_options tiers(uint32_t device_blocks, uint32_t host_blocks, write_policy p,
                    uint32_t threshold = 2) {
  cache_options o;
  o.device_blocks = device_blocks;
  o.host_blocks = host_blocks;
  o.policy = p;
  o.write_through_threshold = threshold;
  return o;
}

// Drives the model the way the hit-rate replay does, one request at a time, transfers done at once.
struct harness {
  cache_model m;
  std::vector<transfer_order> orders;
  std::vector<transfer_order> done;

  explicit harness(const cache_options& o) : m(o) {}

  void drain() {
    while (!orders.empty()) {
      transfer_order o = orders.front();
      orders.erase(orders.begin());
      done.push_back(o);
      m.complete(o, orders);
    }
  }

  size_t count(transfer_kind k) const {
    size_t n = 0;
    for (const auto& o : done)
      n += o.kind == k;
    return n;
  }

  prefix_match match(const std::vector<uint64_t>& ids) {
    auto blocks = blocks_of(ids);
    prefix_match pm;
    m.match(blocks.data(), blocks.size(), pm);
    return pm;
  }

  prefix_match serve(const std::vector<uint64_t>& ids) {
    auto blocks = blocks_of(ids);
    prefix_match pm;
    m.match(blocks.data(), blocks.size(), pm);
    m.acquire_matched(pm.nodes.data(), pm.nodes.size());
    std::vector<block_id> fresh;
    REQUIRE(m.allocate_device(static_cast<uint32_t>(blocks.size()) - pm.device, fresh, orders));
    std::vector<node_id> path = pm.nodes;
    size_t next = 0;
    for (uint32_t i = pm.device; i < pm.device + pm.host; ++i)
      m.swap_in(path[i], fresh[next++], orders);
    node_id parent = path.empty() ? root_node : path.back();
    for (size_t i = path.size(); i < blocks.size(); ++i) {
      commit_result r = m.commit(parent, blocks[i], fresh[next], orders);
      if (!r.adopted)
        m.free_device(fresh[next]);
      ++next;
      path.push_back(parent = r.node);
    }
    drain();
    // It finishes: the backups due since its commit, then the storage decision.
    m.collect_backups(orders);
    drain();
    m.store_finished(path.data(), path.size(), orders);
    drain();
    std::vector<node_id> reversed(path.rbegin(), path.rend());
    m.release(reversed.data(), reversed.size());
    m.collect_backups(orders);
    drain();
    check(true);
    return pm;
  }

  void check(bool quiescent) {
    invariant_report r;
    check_invariants(m, quiescent, r);
    INFO((r.messages.empty() ? std::string{} : r.messages.front()));
    REQUIRE(r.ok());
    REQUIRE(r.checked > 0);
  }

  bool cached(const std::vector<uint64_t>& ids) {
    auto blocks = blocks_of(ids);
    return m.tree().find(blocks.back().hash) != root_node;
  }
};

}  // namespace kvtier::test
