// Every byte of a PD handoff crosses each link once (docs/cluster.md): the decode instance copies
// none of the prompt blocks it received (its prefill instance's write policy backs them up and
// stores them), and a storage handoff leaves to that policy the blocks it stores anyway.

#include <catch2/catch.hpp>

#include "tests/sim/pd_scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// Write-through to host and storage, one storage node, 16-token blocks of 1024 bytes.
deployment_plan deployment(std::vector<pd_role> roles, pd_transfer mode) {
  deployment_plan t = small_config(32, 32);
  instance_of(t).cache.storage = storage_write::always;
  instance_of(t).cache.storage_tier = true;
  instance_of(t).controller.storage = true;
  t.storage.pool.capacity_blocks = 64;
  t.storage.pool.read_gbps = 1;
  t.storage.pool.write_gbps = 1;
  t.storage.pool.op_latency_ns = 0;
  if (roles.empty())
    return t;
  t.front.disaggregated = true;
  t.front.pd.transfer = mode;
  t.front.pd.link_gbps = 1;
  t.front.pd.link_latency_ns = 100;
  t.front.pd.storage_namespace = instance_of(t).controller.storage_namespace;
  std::vector<instance_config> members;
  for (pd_role role : roles) {
    instance_config ic = pd_member(t, role, role == pd_role::prefill ? "prefill-0" : "decode-0");
    if (role == pd_role::prefill && mode == pd_transfer::storage)
      ic.scheduler.pd.writes = handoff_writes::unshared_blocks;  // as the config derives it
    members.push_back(ic);
  }
  return deploy(t, members);
}

// Prompts with shared prefixes and partial last blocks, one after the other.
std::vector<trace_request> workload() {
  trace_request a = request(0, 0, {1, 2, 3, 4}, 3);
  a.input_tokens = 56;
  trace_request b = request(1, 1'000'000, {1, 2, 5, 6}, 3);
  b.input_tokens = 60;
  trace_request c = request(2, 2'000'000, {7, 8, 9}, 2);
  return {a, b, c};
}

uint64_t nic_bytes(const full_result& r) {
  uint64_t n = 0;
  for (const link_report& l : r.engine.links)
    if (l.name == "nic")
      n += l.bytes;
  return n;
}

uint64_t media_written(const full_result& r) {
  uint64_t n = 0;
  for (const link_report& l : r.storage.nodes)
    if (l.name.size() > 6 && l.name.compare(l.name.size() - 6, 6, ".write") == 0)
      n += l.bytes;
  return n;
}

uint64_t stored_bytes(const instance_result& i) {
  return at(i.engine.bytes, transfer_kind::store);
}

}  // namespace

TEST_CASE("pd bytes: each block crosses each link once, a direct handoff stores nothing more",
          "[actors][pd][bytes]") {
  full_result single = run_scenario(deployment({}, pd_transfer::direct), workload());
  require_clean(single);
  REQUIRE(media_written(single) > 0);
  for (pd_transfer mode : {pd_transfer::direct, pd_transfer::storage}) {
    INFO(to_string(mode));
    full_result r =
      run_scenario(deployment({pd_role::prefill, pd_role::decode}, mode), workload());
    require_clean_pd(r);
    REQUIRE(r.front_end.finished == 3);
    const instance_result& p = instance_in(r, pd_role::prefill);
    const instance_result& d = instance_in(r, pd_role::decode);
    // D copies nothing it received: no backup to its host memory, no store.
    CHECK(d2h_bytes(d.engine) == 0);
    CHECK(stored_bytes(d) == 0);
    // P copies each block device -> host once and host -> storage once, and the storage media
    // write every byte the NIC carried there: no put found its block stored already.
    CHECK(d2h_bytes(p.engine) == stored_bytes(p));
    CHECK(stored_bytes(p) == media_written(r));
    CHECK(r.storage.put_present == 0);
    if (mode == pd_transfer::direct) {
      // The same blocks go to storage as from one mixed instance, over the same NIC bytes.
      CHECK(media_written(r) == media_written(single));
      CHECK(nic_bytes(r) == nic_bytes(single));
    } else {
      // Only the two partial blocks, under their handoff keys, are written on top.
      CHECK(media_written(r) == media_written(single) + 2 * 1024);
      CHECK(r.scheduler.handoff_blocks_sent == 2);
    }
  }
}
