// A live step's tree work (its computed blocks' commits and their write-through backups) done
// after its grant (tree_work_timing::after_reply, docs/design.md "Tree work after the reply")
// against the same steps with it in the step.

#include <algorithm>
#include <deque>
#include <random>
#include <tuple>

#include <catch2/catch.hpp>

#include "model/controller/controller_core.hpp"
#include "tests/model/cache/cache_harness.hpp"

using namespace kvtier;
using kvtier::test::tiers;

namespace {

controller_options opts(tree_work_timing timing) {
  controller_options o;
  o.block_size = 16;
  o.tree_work = timing;
  return o;
}

using copy = std::tuple<transfer_kind, block_id, block_id, block_hash>;

// Every copy of `out`, then of what their completions start, until nothing is in flight.
void land_all(controller_core& core, std::vector<transfer>& out, std::vector<copy>& copies) {
  std::deque<transfer> flight(out.begin(), out.end());
  out.clear();
  std::vector<request_id> landed;
  while (!flight.empty()) {
    transfer t = std::move(flight.front());
    flight.pop_front();
    for (const block_move& m : t.blocks)
      copies.emplace_back(t.kind, m.device_block, m.host_block, m.hash);
    std::vector<transfer> more;
    core.on_transfer_done(transfer_done{t.id, true, 0, {}, ""}, more, landed);
    flight.insert(flight.end(), more.begin(), more.end());
  }
}

void check_same(const controller_report& a, const controller_report& b) {
  CHECK(a.device_evictions == b.device_evictions);
  CHECK(a.host_evictions == b.host_evictions);
  CHECK(a.dropped == b.dropped);
  CHECK(a.backups == b.backups);
  CHECK(a.backups_skipped == b.backups_skipped);
  CHECK(a.write_backs == b.write_backs);
  CHECK(a.swap_ins == b.swap_ins);
  CHECK(a.tree_nodes == b.tree_nodes);
  CHECK(a.device_used == b.device_used);
  CHECK(a.host_used == b.host_used);
  CHECK(a.invariant_violations == 0);
  CHECK(b.invariant_violations == 0);
}

}  // namespace

TEST_CASE("controller: a commit leaves its backups for after the reply, and they are the step's",
          "[actors][controller][write_policy]") {
  const cache_options cache = tiers(4, 4, write_policy::write_through);
  controller_core in_step(cache, opts(tree_work_timing::in_step));
  controller_core after(cache, opts(tree_work_timing::after_reply));
  for (controller_core* core : {&in_step, &after}) {
    core->on_arrival(1, test::blocks_of({1, 2}));
    grant g;
    step_inputs in;
    std::vector<transfer> out;
    core->on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
    REQUIRE(g.admits.at(0).admitted);
    core->on_commit(commit{2, {{1, 32}}, {}, {}, {}, {}}, g = {}, out, in = {});
    if (core == &in_step) {
      REQUIRE(out.size() == 1);
      CHECK(out[0].kind == transfer_kind::backup);
      CHECK(out[0].blocks.size() == 2);
      continue;
    }
    CHECK(out.empty());  // the grant goes first
    CHECK(core->report().backups == 0);
    core->collect_deferred_work(out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].kind == transfer_kind::backup);
    CHECK(out[0].blocks.size() == 2);
    std::vector<transfer> again;
    core->collect_deferred_work(again);  // once only
    CHECK(again.empty());
  }
  check_same(in_step.report(), after.report());
}

TEST_CASE("controller: backups a reply did not wait for are collected first by the next commit",
          "[actors][controller][write_policy]") {
  const cache_options cache = tiers(4, 4, write_policy::write_through);
  controller_core core(cache, opts(tree_work_timing::after_reply));
  core.on_arrival(1, test::blocks_of({1, 2}));
  core.on_arrival(2, test::blocks_of({3}));
  grant g;
  step_inputs in;
  std::vector<transfer> out;
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  core.on_commit(commit{2, {{1, 32}}, {}, {}, {}, {}}, g = {}, out, in = {});
  CHECK(out.empty());
  core.on_commit(commit{3, {}, {}, {}, {}, {{2, 16}}}, g = {}, out, in = {});
  REQUIRE(!out.empty());
  CHECK(out[0].kind == transfer_kind::backup);  // before anything of step 3
  CHECK(core.report().backups == 2);
}

TEST_CASE("controller: a step naming again an engine id a backup reads keeps its backups before "
          "its grant",
          "[actors][controller][write_policy]") {
  const cache_options cache = tiers(4, 4, write_policy::write_through);
  controller_core core(cache, opts(tree_work_timing::after_reply));
  core.on_arrival(1, test::blocks_of({1}));
  core.on_arrival(2, test::blocks_of({2}));
  grant g;
  step_inputs in;
  std::vector<transfer> out;
  commit admit_a{1, {}, {}, {}, {}, {{1, 16}}};
  admit_a.admit_blocks = {{5}};  // the engine computes A's block into its block 5
  core.on_commit(admit_a, g, out, in);
  REQUIRE(g.admits.at(0).admitted);
  // A's block is computed and A finishes; the engine frees its block 5 and names it for B in
  // the same step: the backup of A's block reads 5, which B's forward writes.
  commit reuse{2, {{1, 16}}, {1}, {}, {}, {{2, 16}}};
  reuse.admit_blocks = {{5}};
  core.on_commit(reuse, g = {}, out, in = {});
  REQUIRE(g.admits.at(0).admitted);
  auto backup = std::find_if(out.begin(), out.end(),
                             [](const transfer& t) { return t.kind == transfer_kind::backup; });
  REQUIRE(backup != out.end());  // in the step, not after its reply
  CHECK(backup->blocks.at(0).device_block == 5);
  CHECK(std::count(in.barriers.begin(), in.barriers.end(), backup->id) == 1);
  std::vector<transfer> later;
  core.collect_deferred_work(later);
  CHECK(later.empty());
}

TEST_CASE("controller: tree work after the reply makes the copies and the cache of tree work in "
          "the step (random steps)",
          "[actors][controller][write_policy][property]") {
  std::mt19937_64 rng(20261130);
  uint64_t backups = 0, skipped = 0, deferred = 0;
  for (int scenario = 0; scenario < 300; ++scenario) {
    const uint32_t device = 6 + static_cast<uint32_t>(rng() % 12);
    const uint32_t host = 3 + static_cast<uint32_t>(rng() % 24);  // at times below the device's
    const cache_options cache = tiers(device, host, rng() % 4 == 0
                                                      ? write_policy::write_through_selective
                                                      : write_policy::write_through);
    const bool engine_ids = rng() % 2 == 0;                        // protocol version 3
    controller_core a(cache, opts(tree_work_timing::in_step));
    controller_core b(cache, opts(tree_work_timing::after_reply));
    // Admitted requests prefill in one chunk or in several (a block or two a step), and finish
    // once computed, at times in the step that reports their last chunk.
    struct live {
      request_id id;
      uint32_t total, done;
    };
    std::vector<live> running;
    request_id next = 1;
    uint32_t engine_next = 100;
    for (uint64_t step = 1; step <= 30; ++step) {
      commit c;
      c.step = step;
      std::vector<live> still;
      for (live r : running) {
        if (r.done == r.total && rng() % 2 == 0) {
          c.finished.push_back(r.id);
          continue;
        }
        if (r.done < r.total) {
          uint32_t chunk = rng() % 2 == 0 ? r.total : 16 * (1 + static_cast<uint32_t>(rng() % 2));
          r.done = std::min(r.total, r.done + chunk);
          c.computed.push_back({r.id, r.done});
          if (r.done == r.total && rng() % 3 == 0) {
            c.finished.push_back(r.id);
            continue;
          }
        }
        still.push_back(r);
      }
      int arrivals = static_cast<int>(rng() % 3);
      for (int i = 0; i < arrivals; ++i, ++next) {
        std::vector<uint64_t> ids;
        size_t n = 1 + rng() % 4;
        for (size_t k = 0; k < n; ++k)
          ids.push_back(k == 0 ? rng() % 3 : ids.back() * 4 + rng() % 4);  // shared prefixes
        a.on_arrival(next, test::blocks_of(ids));
        b.on_arrival(next, test::blocks_of(ids));
        c.admits.push_back({next, static_cast<uint32_t>(n) * 16});
        if (engine_ids) {
          std::vector<uint32_t> named;
          for (size_t k = 0; k < n; ++k)
            named.push_back(engine_next++);
          c.admit_blocks.push_back(named);
        }
      }
      grant ga, gb;
      step_inputs ia, ib;
      std::vector<transfer> oa, ob;
      a.on_commit(c, ga, oa, ia);
      b.on_commit(c, gb, ob, ib);
      b.check(false);  // the invariants hold between the reply and its tree work too
      REQUIRE(ga.admits.size() == gb.admits.size());
      for (size_t i = 0; i < ga.admits.size(); ++i) {
        CHECK(ga.admits[i].admitted == gb.admits[i].admitted);
        CHECK(ga.admits[i].device_blocks == gb.admits[i].device_blocks);
        CHECK(ga.admits[i].host_blocks == gb.admits[i].host_blocks);
        if (ga.admits[i].admitted)
          still.push_back({ga.admits[i].req, c.admits[i].tokens, 0});
      }
      CHECK(ga.available_blocks == gb.available_blocks);
      CHECK((ia.swap_in != 0) == (ib.swap_in != 0));
      b.collect_deferred_work(ob);  // the reply went out
      std::vector<copy> ca, cb;
      land_all(a, oa, ca);
      land_all(b, ob, cb);
      std::sort(ca.begin(), ca.end());
      std::sort(cb.begin(), cb.end());
      CHECK(ca == cb);
      a.check(false);
      b.check(false);
      check_same(a.report(), b.report());
      running = still;
    }
    backups += b.report().backups;
    skipped += b.report().backups_skipped;
    deferred += b.commits_after_reply();
  }
  CHECK(backups > 1000);  // the cases back blocks up, and some find the host tier full
  CHECK(skipped > 0);
  CHECK(deferred > 1000);  // steps whose computed blocks joined the tree after the reply
}
