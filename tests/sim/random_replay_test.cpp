// Seeded random timed replays: small pools, bursts of arrivals sharing prefixes, every write
// policy and storage setting. Each must drain (no deadlock, no livelock) with every invariant
// checked after every commit; a failing seed reproduces the same run.

#include <random>

#include <catch2/catch.hpp>

#include "tests/sim/scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

struct random_run {
  deployment_plan config;
  std::vector<trace_request> requests;
};

random_run make_run(uint64_t seed) {
  std::mt19937_64 rng(seed * 104729);
  auto pick = [&](uint64_t n) { return rng() % n; };
  const write_policy policies[] = {write_policy::write_through,
                                   write_policy::write_through_selective,
                                   write_policy::write_back};
  const storage_write writes[] = {storage_write::always, storage_write::on_host_evict,
                                  storage_write::never};
  auto device = static_cast<uint32_t>(8 + pick(32));
  auto host = static_cast<uint32_t>(pick(3) == 0 ? 0 : 8 + pick(64));
  random_run run{small_config(device, host), {}};
  deployment_plan& c = run.config;
  instance_of(c).cache.policy = policies[pick(3)];
  instance_of(c).cache.write_through_threshold = static_cast<uint32_t>(1 + pick(3));
  instance_of(c).cache.eviction = pick(2) ? eviction_policy::lru : eviction_policy::lfu;
  if (host > 0 && pick(3) != 0) {
    instance_of(c).cache.storage = writes[pick(3)];
    instance_of(c).cache.storage_tier = true;
    instance_of(c).controller.storage = true;
    c.storage.pool.capacity_blocks = 16 + pick(200);
    c.storage.pool.nodes = static_cast<uint32_t>(1 + pick(3));
    c.storage.pool.op_latency_ns = static_cast<int64_t>(pick(2000));
  }
  scheduler_options& so = instance_of(c).scheduler.options;
  so.max_num_seqs = static_cast<uint32_t>(1 + pick(8));
  so.token_budget = static_cast<uint32_t>(16 * (1 + pick(16)));
  so.reserve_output_blocks = static_cast<double>(pick(4));
  so.reserve_decay = 0.25;
  so.probe_limit = static_cast<uint32_t>(1 + pick(8));
  compute_profile& p = instance_of(c).scheduler.compute;
  p.step_overhead_ns = 200;
  p.prefill_token_ns = static_cast<double>(10 + pick(100));
  p.decode_token_ns = static_cast<double>(100 + pick(1000));

  // Families of prompts sharing prefixes, arriving in bursts (many at one instant).
  std::vector<std::vector<uint64_t>> past;
  uint64_t next_id = 1;
  int64_t at = 0;
  size_t count = 20 + pick(40);
  for (uint64_t seq = 0; seq < count; ++seq) {
    if (pick(4) == 0)
      at += static_cast<int64_t>(pick(200'000));
    std::vector<uint64_t> ids;
    if (!past.empty() && pick(4) != 0) {
      const auto& base = past[pick(past.size())];
      ids.assign(base.begin(), base.begin() + static_cast<long>(pick(base.size() + 1)));
    }
    size_t longest = 2 + pick(device);  // some never fit with their output: rejected
    for (size_t extra = 1 + pick(6); extra > 0 && ids.size() < longest; --extra)
      ids.push_back(next_id++);
    past.push_back(ids);
    run.requests.push_back(request(seq, at, ids, static_cast<uint32_t>(1 + pick(40))));
  }
  // Drawn last, so that every earlier draw (and each seed's workload) stays as it was.
  const preemption_mode modes[] = {preemption_mode::recompute, preemption_mode::save_to_storage,
                                   preemption_mode::swap_to_host};
  preemption_mode mode = modes[pick(3)];
  if (mode == preemption_mode::save_to_storage && !instance_of(c).controller.storage)
    mode = host > 0 ? preemption_mode::swap_to_host : preemption_mode::recompute;
  if (mode == preemption_mode::swap_to_host && host == 0)
    mode = preemption_mode::recompute;
  so.preemption = mode;
  instance_of(c).controller.preemption = mode;
  const prefetch_policy policies_of_prefetch[] = {
    prefetch_policy::best_effort, prefetch_policy::wait_complete, prefetch_policy::timeout};
  instance_of(c).controller.prefetch = policies_of_prefetch[pick(3)];
  instance_of(c).controller.prefetch_timeout_ns = static_cast<int64_t>(pick(5000));
  instance_of(c).controller.prefetch_timeout_per_ki_token_ns = static_cast<int64_t>(pick(100'000));
  instance_of(c).controller.prefetch_threshold_tokens = pick(3) == 0 ? 16 * pick(4) : 0;
  instance_of(c).controller.prefetch_capacity_blocks = pick(2) ? static_cast<uint32_t>(pick(device)) : 0;
  return run;
}

}  // namespace

TEST_CASE("replay: random workloads drain with every invariant under every policy",
          "[actors][replay][fuzz]") {
  // 200 seeds, and seeds that once failed: 317 (one transfer both wrote and read a host block
  // freed and reused within a commit, so it waited for itself), 5872 (a landed prefetch freed
  // the blocks the queue's head waited for, and nothing told the scheduler).
  std::vector<uint64_t> seeds{317, 5872};
  for (uint64_t seed = 1; seed <= 200; ++seed)
    seeds.push_back(seed);
  for (uint64_t seed : seeds) {
    random_run run = make_run(seed);
    const deployment_plan& c = run.config;
    INFO("seed " << seed << " device " << instance_of(c).cache.device_blocks << " host "
                 << instance_of(c).cache.host_blocks << " storage " << c.storage.pool.capacity_blocks << " policy "
                 << to_string(instance_of(c).cache.policy) << " preemption "
                 << to_string(instance_of(c).controller.preemption) << " prefetch "
                 << to_string(instance_of(c).controller.prefetch) << " protected "
                 << instance_of(c).controller.prefetch_capacity_blocks);
    size_t requests = run.requests.size();
    full_result r = run_scenario(c, std::move(run.requests));
    INFO((r.controller.invariant_messages.empty() ? std::string{}
                                                  : r.controller.invariant_messages.front()));
    REQUIRE(r.controller.invariant_violations == 0);
    REQUIRE(r.controller.invariant_checked > 0);
    REQUIRE(r.drained);
    uint64_t finished = 0;
    for (const request_record& x : r.scheduler.requests)
      finished += x.finish_ns >= 0;
    REQUIRE(finished + r.scheduler.rejected == requests);
  }
}

TEST_CASE("replay: a random run repeats exactly from its seed", "[actors][replay][fuzz]") {
  random_run a = make_run(7), b = make_run(7);
  full_result x = run_scenario(a.config, std::move(a.requests));
  full_result y = run_scenario(b.config, std::move(b.requests));
  REQUIRE(x.scheduler.requests.size() == y.scheduler.requests.size());
  for (size_t i = 0; i < x.scheduler.requests.size(); ++i) {
    CHECK(x.scheduler.requests[i].finish_ns == y.scheduler.requests[i].finish_ns);
    CHECK(x.scheduler.requests[i].hit_blocks == y.scheduler.requests[i].hit_blocks);
  }
  CHECK(x.messages == y.messages);
  CHECK(x.last_event_ns == y.last_event_ns);
}

TEST_CASE("cluster replay: random deployments drain with every invariant on every instance",
          "[actors][replay][cluster][fuzz]") {
  // 200 seeds: the instance count, each instance's device pool, the router policy and session
  // affinity come from the seed as well as everything make_run draws.
  const route_policy policies[] = {route_policy::round_robin, route_policy::least_loaded,
                                   route_policy::cache_aware};
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    random_run run = make_run(seed);
    deployment_plan& c = run.config;
    std::mt19937_64 rng(seed * 7727);
    size_t count = 2 + rng() % 3;
    const instance_config base = instance_of(c);
    c.instances.clear();
    for (size_t i = 0; i < count; ++i) {
      instance_config one = base;
      one.name = "mixed-" + std::to_string(i);
      uint32_t device = base.cache.device_blocks + static_cast<uint32_t>(rng() % 16);
      one.cache.device_blocks = device;
      one.scheduler.device_blocks = device;
      c.instances.push_back(one);
    }
    c.front.router.policy = policies[rng() % 3];
    c.front.router.session_affinity = rng() % 2 == 0;
    c.front.router.load_weight = static_cast<double>(rng() % 3) / 2;
    INFO("seed " << seed << " instances " << count << " policy "
                 << static_cast<int>(c.front.router.policy));
    size_t requests = run.requests.size();
    full_result r = run_scenario(c, std::move(run.requests));
    INFO((r.controller.invariant_messages.empty() ? std::string{}
                                                  : r.controller.invariant_messages.front()));
    REQUIRE(r.controller.invariant_violations == 0);
    REQUIRE(r.drained);
    REQUIRE(r.instances.size() == count);
    uint64_t finished = 0, rejected = 0;
    for (size_t i = 0; i < count; ++i) {
      const instance_result& x = r.instances[i];
      REQUIRE(x.controller.invariant_checked > 0);
      REQUIRE(x.controller.invariant_violations == 0);  // quiescent check: nothing held or leaked
      REQUIRE(x.scheduler.requests.size() == r.front_end.per_instance[i]);
      for (const request_record& q : x.scheduler.requests)
        finished += q.finish_ns >= 0;
      rejected += x.scheduler.rejected;
    }
    REQUIRE(finished + rejected == requests);
    REQUIRE(r.front_end.finished + r.front_end.rejected == requests);
  }
}

TEST_CASE("replay: save_to_storage victims are looked up and restored from storage",
          "[actors][replay][fuzz][preemption]") {
  // The random workloads with a storage tier, every one under save_to_storage: some victims
  // lose their blocks from device and host before re-admission and must come back from storage.
  uint64_t runs = 0, lookups = 0, from_storage = 0, stored = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    random_run run = make_run(seed);
    deployment_plan& c = run.config;
    if (!instance_of(c).controller.storage)
      continue;
    instance_of(c).scheduler.options.preemption = preemption_mode::save_to_storage;
    instance_of(c).controller.preemption = preemption_mode::save_to_storage;
    instance_of(c).controller.prefetch = prefetch_policy::wait_complete;
    INFO("seed " << seed);
    full_result r = run_scenario(c, std::move(run.requests));
    INFO((r.controller.invariant_messages.empty() ? std::string{}
                                                  : r.controller.invariant_messages.front()));
    REQUIRE(r.controller.invariant_violations == 0);
    REQUIRE(r.drained);
    ++runs;
    lookups += r.controller.preemption.readmission_lookups;
    from_storage += r.scheduler.restored_tokens[2];
    stored += r.controller.preemption.stored_blocks;
  }
  INFO("runs " << runs << " lookups " << lookups << " restored from storage " << from_storage
       << " stored " << stored);  // seeds 1-200: 80, 7, 16, 1413 when written
  // Seeds 1-200 restore nothing from storage once a re-admission's own blocks stop counting as
  // hits (docs/design.md "Write policies"): the one restored block came from a backup those
  // hits triggered. Seeds up to 600 still exercise the path.
  CHECK(runs > 50);
  CHECK(stored > 0);
  CHECK(lookups > 0);
  CHECK(from_storage > 0);
}
