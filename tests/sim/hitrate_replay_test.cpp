#include "sim/hitrate/hitrate_replay.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "sim/request_blocks.hpp"

using namespace kvtier;

namespace {

trace_request request(uint64_t seq, std::vector<uint64_t> ids, uint32_t block_size = 16) {
  trace_request r;
  r.seq = seq;
  r.ids = std::move(ids);
  r.trace_block_size = block_size;
  r.id_space = 1;
  r.input_tokens = static_cast<uint32_t>(r.ids.size()) * block_size;
  return r;
}

replay_config small_config(uint32_t device, uint32_t host, write_policy p, uint64_t storage,
                           storage_write sw = storage_write::always) {
  replay_config c;
  c.block_size = 16;
  c.cache.device_blocks = device;
  c.cache.host_blocks = host;
  c.cache.policy = p;
  c.cache.storage = sw;
  c.cache.storage_tier = storage > 0;
  c.storage_blocks = storage;
  c.storage_namespace = 99;
  return c;
}

struct runner {
  hitrate_replay replay;
  request_blocks mapper;
  std::vector<cache_block> blocks;
  uint64_t seq = 0;

  runner(const replay_config& c, uint64_t check_every)
    : replay(c, check_every), mapper(c.block_size, {"test"}) {}

  request_outcome serve(std::vector<uint64_t> ids, uint32_t trace_block_size = 16) {
    trace_request r = request(seq++, std::move(ids), trace_block_size);
    mapper.map(r, blocks);
    request_outcome o;
    replay.process(r, blocks, o);
    return o;
  }
};

}  // namespace

TEST_CASE("hitrate: a worked example across device, host and storage", "[hitrate]") {
  // 4 device blocks, 4 host blocks, write_through, 8 storage blocks written on every backup.
  runner x(small_config(4, 4, write_policy::write_through, 8), 1);
  // R1 [1,2,3]: nothing cached. All three are backed up to host and stored.
  auto r1 = x.serve({1, 2, 3});
  CHECK(r1.hit_blocks == std::array<uint32_t, 3>{0, 0, 0});
  // R2 [1,2,4,5]: device hits 1,2. Two new blocks, one free: leaf 3 leaves the device (its host
  // copy stays); backing up 4,5 needs host room: host-only leaf 3 leaves host (it is stored).
  auto r2 = x.serve({1, 2, 4, 5});
  CHECK(r2.hit_blocks == std::array<uint32_t, 3>{2, 0, 0});
  // R3 [1,2,3]: device hits 1,2; 3 is only in storage. The whole prompt is cached, and a full
  // hit's last block is computed again (docs/design.md, "Hit ratio"): 3 counts as computed, not
  // as a storage hit, and is not loaded for nothing. Computing it evicts device leaf 5 (its host
  // copy stays, host-only); its backup takes the host block of host-only 5 (stored already).
  auto r3 = x.serve({1, 2, 3});
  CHECK(r3.hit_blocks == std::array<uint32_t, 3>{2, 0, 0});
  CHECK(r3.hit_tokens == std::array<uint64_t, 3>{32, 0, 0});
  // R4 [1,2,4,5]: device hits 1,2,4; 5 is only in storage and, as the full hit's last block,
  // computed: leaf 3 leaves the device, and then the host.
  auto r4 = x.serve({1, 2, 4, 5});
  CHECK(r4.hit_blocks == std::array<uint32_t, 3>{3, 0, 0});

  // Hits: R1 0, R2 2, R3 2, R4 3, all on device; nothing is loaded that would be computed.
  const hitrate_totals& t = x.replay.totals();
  CHECK(t.blocks == 14);
  CHECK(t.hit_blocks == std::array<uint64_t, 3>{7, 0, 0});
  const cache_counters& c = x.replay.model().counters();
  CHECK(c.device_evictions == 3);
  CHECK(c.host_evictions == 3);
  CHECK(c.backups == 7);
  CHECK(c.swap_ins == 0);
  CHECK(c.loads == 0);
  CHECK(c.stores == 7);  // 3 and 5 again: their nodes are new (a put of a block held writes nothing)
  CHECK(c.write_backs == 0);
  CHECK(x.replay.storage()->size() == 5);
  CHECK(x.replay.model().tree().size() == 4);
  const invariant_report& inv = x.replay.finish();
  CHECK(inv.ok());
  CHECK(x.replay.invariant_passes() == 5);
}

TEST_CASE("hitrate: host hits come back from host and count per tier", "[hitrate]") {
  runner x(small_config(2, 8, write_policy::write_back, 0), 1);
  x.serve({1, 2});
  x.serve({3, 4});  // 1, 2 written back to host
  // Both blocks come back from host, but a full hit's last block is computed again (docs/
  // design.md, "Hit ratio"): one host hit, and hit + computed = the prompt's 32 tokens.
  auto r = x.serve({1, 2});
  CHECK(r.hit_blocks == std::array<uint32_t, 3>{0, 1, 0});
  CHECK(r.hit_tokens == std::array<uint64_t, 3>{0, 16, 0});
  CHECK(x.replay.model().counters().write_backs == 4);  // 1,2 then 3,4
  CHECK(x.replay.finish().ok());
}

// Under write_through a host tier smaller than the device cost hits: a backup that found the
// host full of copies moved the least recently used idle device block off the device, so the
// cache shrank to the host's size (conversation trace, device 6.4M tokens: 0.2429 without a host,
// 0.0702 with 1.6M). An inclusive host tier that is full gives up the copy of its least
// recently used idle device block instead, and the device keeps it (docs/design.md, "Write
// policies").
TEST_CASE("hitrate: a host tier smaller than the device costs no hits", "[hitrate]") {
  for (write_policy p : {write_policy::write_through, write_policy::write_through_selective}) {
    runner none(small_config(6, 0, p, 0), 1);
    runner small_host(small_config(6, 2, p, 0), 1);
    for (runner* x : {&none, &small_host}) {
      x->serve({1, 2});
      x->serve({3, 4});
      x->serve({1, 2});  // the device holds 1, 2, 3, 4: a full hit, its last block computed
      x->serve({1, 2});
      x->serve({3, 4});
    }
    CHECK(small_host.replay.totals().hit_blocks == none.replay.totals().hit_blocks);
    CHECK(none.replay.totals().hit_blocks[0] == 3);
    CHECK(small_host.replay.model().counters().device_evictions == 0);
    CHECK(small_host.replay.finish().ok());
  }
}

// The same over random request streams: with LRU, the hits of write_through never fall as the
// host grows, whatever its size against the device's (docs/design.md, "Checking the model").
TEST_CASE("hitrate: under LRU a larger host never lowers the hits", "[hitrate][property]") {
  std::mt19937_64 rng(35);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::vector<uint64_t>> stream;
    for (int i = 0; i < 30; ++i) {
      std::vector<uint64_t> ids;
      uint64_t root = rng() % 4;
      size_t n = 1 + rng() % 5;
      for (size_t k = 0; k < n; ++k)
        ids.push_back(root * 100 + (k < 2 ? k : rng() % 6));
      stream.push_back(ids);
    }
    const uint32_t device = 2 + static_cast<uint32_t>(rng() % 8);
    for (write_policy p : {write_policy::write_through, write_policy::write_back}) {
      uint64_t previous = 0;
      for (uint32_t host = 0; host <= 16; ++host) {
        runner x(small_config(device, host, p, 0), 0);
        for (const auto& ids : stream)
          x.serve(ids);
        uint64_t hits = 0;
        for (uint64_t h : x.replay.totals().hit_blocks)
          hits += h;
        INFO("round " << round << " " << to_string(p) << " device " << device << " host "
                      << host);
        CHECK(hits >= previous);
        CHECK(x.replay.finish().ok());
        previous = hits;
      }
    }
  }
}

TEST_CASE("hitrate: a request larger than the device caches what fits", "[hitrate]") {
  runner x(small_config(3, 0, write_policy::write_through_selective, 0), 1);
  auto r = x.serve({1, 2, 3, 4, 5});
  CHECK(r.uncached_blocks == 2);
  auto again = x.serve({1, 2, 3, 4, 5});
  CHECK(again.hit_blocks[0] == 3);
  CHECK(x.replay.finish().ok());
}

// A reference for the device-only case: a plain map of blocks, leaf-only LRU by linear scan.
// Eviction keys follow the model's rule: a node's order is set when it is created and each time
// it becomes unreferenced, from one counter.
struct reference_cache {
  struct block {
    block_hash parent = 0;
    uint64_t order = 0;
    uint32_t children = 0;
  };
  uint32_t capacity;
  std::map<block_hash, block> blocks;
  uint64_t next_order = 1;

  uint32_t serve(const std::vector<cache_block>& req) {
    uint32_t hits = 0;
    while (hits < req.size() && blocks.count(req[hits].hash))
      ++hits;
    std::vector<block_hash> held;
    for (uint32_t i = 0; i < hits; ++i)
      held.push_back(req[i].hash);
    auto is_held = [&](block_hash h) {
      return std::find(held.begin(), held.end(), h) != held.end();
    };
    uint32_t need = static_cast<uint32_t>(req.size()) - hits;
    uint32_t unheld = static_cast<uint32_t>(blocks.size()) - hits;
    uint32_t free = capacity - static_cast<uint32_t>(blocks.size());
    uint32_t placed = std::min(need, free + unheld);
    for (uint32_t k = placed > free ? placed - free : 0; k > 0; --k) {
      auto victim = blocks.end();
      for (auto it = blocks.begin(); it != blocks.end(); ++it)
        if (it->second.children == 0 && !is_held(it->first)
            && (victim == blocks.end() || it->second.order < victim->second.order))
          victim = it;
      REQUIRE(victim != blocks.end());
      if (victim->second.parent)
        --blocks[victim->second.parent].children;
      blocks.erase(victim);
    }
    for (uint32_t i = hits; i < hits + placed; ++i) {
      block_hash parent = i ? req[i - 1].hash : 0;
      blocks[req[i].hash] = block{parent, next_order++, 0};
      if (parent)
        ++blocks[parent].children;
      held.push_back(req[i].hash);
    }
    for (auto it = held.rbegin(); it != held.rend(); ++it)
      blocks[*it].order = next_order++;
    return hits;
  }
};

std::vector<uint64_t> random_request(std::mt19937_64& rng, std::vector<std::vector<uint64_t>>& past,
                                     uint64_t& next_id, uint32_t max_len) {
  std::vector<uint64_t> ids;
  if (!past.empty() && rng() % 4 != 0) {
    const auto& base = past[rng() % past.size()];
    ids.assign(base.begin(), base.begin() + static_cast<long>(rng() % (base.size() + 1)));
  }
  uint32_t extra = 1 + static_cast<uint32_t>(rng() % max_len);
  for (uint32_t i = 0; i < extra && ids.size() < max_len; ++i)
    ids.push_back(next_id++);
  past.push_back(ids);
  return ids;
}

TEST_CASE("hitrate: device-only LRU agrees with a naive reference", "[hitrate][reference]") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    uint32_t capacity = 6 + static_cast<uint32_t>(rng() % 30);
    runner x(small_config(capacity, 0, write_policy::write_through_selective, 0), 0);
    reference_cache ref{capacity, {}};
    std::vector<std::vector<uint64_t>> past;
    uint64_t next_id = 1;
    for (int i = 0; i < 400; ++i) {
      auto ids = random_request(rng, past, next_id, 12);
      auto o = x.serve(ids);
      REQUIRE(o.hit_blocks[0] == ref.serve(x.blocks));
    }
    REQUIRE(x.replay.finish().ok());
  }
}

TEST_CASE("hitrate: random workloads keep every invariant under every policy", "[hitrate][fuzz]") {
  const write_policy policies[] = {write_policy::write_through,
                                   write_policy::write_through_selective,
                                   write_policy::write_back};
  const storage_write writes[] = {storage_write::always, storage_write::on_host_evict,
                                  storage_write::never};
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    uint32_t device = 4 + static_cast<uint32_t>(rng() % 40);
    uint32_t host = static_cast<uint32_t>(rng() % 60);
    uint64_t storage = host > 0 ? rng() % 100 : 0;
    replay_config c = small_config(device, host, policies[rng() % 3], storage, writes[rng() % 3]);
    c.cache.write_through_threshold = 1 + static_cast<uint32_t>(rng() % 3);
    c.cache.eviction = rng() % 2 ? eviction_policy::lru : eviction_policy::lfu;
    c.storage_nodes = 1 + static_cast<uint32_t>(rng() % 3);
    bool split = rng() % 2;  // 32-token trace blocks onto 16-token cache blocks
    INFO("seed " << seed << " device " << device << " host " << host << " storage " << storage
                 << " policy " << to_string(c.cache.policy));
    runner x(c, 1);
    std::vector<std::vector<uint64_t>> past;
    uint64_t next_id = 1;
    for (int i = 0; i < 300; ++i) {
      auto ids = random_request(rng, past, next_id, 10);
      x.serve(ids, split ? 32 : 16);
      const invariant_report& inv = x.replay.invariants();
      INFO((inv.messages.empty() ? std::string{} : inv.messages.front()));
      REQUIRE(inv.ok());
    }
    REQUIRE(x.replay.finish().ok());
  }
}

TEST_CASE("hitrate: bytes each write policy moves on a hand-worked trace", "[hitrate][write_policy]") {
  // Device 2 blocks, host 4, storage 8 written on every host copy. Six one-block requests:
  // 1, 2, 3 fill the device (3 evicts 1), then 1, 2, 3 again. Each prompt is one block, so each
  // repeat is a full hit whose last (only) block is computed, not swapped in nor loaded, and its
  // copies stay where they are (docs/design.md, "The hit-rate replay, request by request", step
  // 1): no H2D at all, and no hit.
  //   R1 [1]  compute 1           write_through: backup 1
  //   R2 [2]  compute 2           write_through: backup 2
  //   R3 [3]  evict 1, compute 3  write_through: backup 3; write_back: write back 1
  //   R4 [1]  evict 2, compute 1  write_back: write back 2 (1's host copy stays: no swap-in)
  //   R5 [2]  evict 3, compute 2  write_back: write back 3
  //   R6 [3]  evict 1, compute 3  1 has its host copy: metadata only
  // Storage is written at each request's finish whatever the host policy: under
  // write_through_selective and write_back, R1, R2 and R3 stage their block through a host block
  // (a D2H each) to store it. Under selective, R3 dropped 1 (no copy); R4 finds it in storage, and
  // the match counts toward its threshold (step 5): the recomputed 1 is backed up (a D2H) and put
  // again (storage holds it: the put writes nothing but counts in `stores`), and so are 2 and 3.
  // The reference model (tools/reference/kvtier_ref.py) gives the same counts.
  struct expected {
    write_policy policy;
    bool keep;
    uint64_t d2h_blocks, h2d_blocks, host_hits, puts;
  };
  const expected cases[] = {
    {write_policy::write_through, false, 3, 0, 0, 3},
    {write_policy::write_through_selective, false, 6, 0, 0, 6},
    {write_policy::write_back, false, 6, 0, 0, 3},
    {write_policy::write_back, true, 6, 0, 0, 3},
  };
  for (const auto& e : cases) {
    replay_config c = small_config(2, 4, e.policy, 8);
    c.cache.write_back_keeps_host_copy = e.keep;
    c.model.layers = 2;
    c.model.kv_heads = 1;
    c.model.head_dim = 8;
    c.model.dtype_bytes = 2;  // 64 bytes per token, 1024 per block of 16
    REQUIRE(c.block_bytes() == 1024);
    runner x(c, 1);
    for (uint64_t id : {1, 2, 3, 1, 2, 3})
      x.serve({id});
    const cache_counters& k = x.replay.model().counters();
    INFO(to_string(e.policy) << (e.keep ? " keep" : ""));
    // backups include the copies staged for a store at finish (cache_model::store_finished)
    uint64_t d2h_bytes = (k.backups + k.write_backs) * c.block_bytes();
    CHECK(d2h_bytes == e.d2h_blocks * 1024);
    CHECK(k.swap_ins * c.block_bytes() == e.h2d_blocks * 1024);  // H2D bytes
    CHECK(k.stores == e.puts);                                   // storage puts
    CHECK(x.replay.totals().hit_blocks[1] == e.host_hits);
    CHECK(x.replay.totals().hit_blocks[2] == 0);
    CHECK(x.replay.finish().ok());
  }
}

TEST_CASE("hitrate: with prefix caching off every request computes its whole prompt",
          "[hitrate]") {
  replay_config c = small_config(8, 8, write_policy::write_through, 16);
  c.cache.caching = prefix_caching::off;
  runner x(c, 1);
  for (int i = 0; i < 3; ++i) {
    request_outcome o = x.serve({1, 2, 3});
    for (tier t : all_tiers)
      CHECK(at(o.hit_tokens, t) == 0);
    CHECK(o.uncached_blocks == 0);
  }
  CHECK(x.replay.model().counters().stores == 0);
  CHECK(x.replay.finish().ok());
}

TEST_CASE("hitrate: a larger device never lowers the hits of a request longer than the device",
          "[hitrate][monotone]") {
  // Before blocks that did not fit passed through the device, the 2-block device kept the long
  // request's tail out of the host tier, which then still held [1, 2]: 4 hits against the
  // 4-block device's 2 (docs/design.md, "Hit ratio").
  auto hits = [](uint32_t device) {
    runner x(small_config(device, 4, write_policy::write_through, 0), 1);
    uint32_t total = 0;
    for (const std::vector<uint64_t>& ids :
         {std::vector<uint64_t>{1, 2}, {10, 11, 12, 13}, {1, 2}, {10, 11, 12, 13}}) {
      request_outcome o = x.serve(ids);
      for (uint32_t h : o.hit_blocks)
        total += h;
    }
    CHECK(x.replay.finish().ok());
    return total;
  };
  uint32_t small = hits(2), large = hits(4);
  CHECK(small == 2);
  CHECK(large >= small);
}
