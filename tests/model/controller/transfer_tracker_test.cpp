#include "model/controller/transfer_tracker.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

transfer_order order(uint64_t id, transfer_kind kind, block_id device, block_id host) {
  transfer_order o;
  o.id = id;
  o.kind = kind;
  o.device_block = device;
  o.host_block = host;
  o.hash = id;
  return o;
}

}  // namespace

TEST_CASE("transfer_tracker: one transfer per kind, later kinds after the ones they read",
          "[controller][tracker]") {
  transfer_tracker t(1);
  std::vector<transfer> out;
  t.batch({order(1, transfer_kind::backup, 3, 7), order(2, transfer_kind::backup, 4, 8),
           order(3, transfer_kind::store, 0, 7)},
          out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == transfer_kind::backup);
  CHECK(out[0].blocks.size() == 2);
  CHECK(out[0].after.empty());
  CHECK(out[1].kind == transfer_kind::store);
  CHECK(out[1].after == std::vector<uint64_t>{out[0].id});
  // A swap-in into device block 3 must wait for the backup still reading it.
  std::vector<transfer> next;
  t.batch({order(4, transfer_kind::swap_in, 3, 9)}, next);
  REQUIRE(next.size() == 1);
  CHECK(next[0].after == std::vector<uint64_t>{out[0].id});
  CHECK(t.finish(out[0].id).size() == 2);
  CHECK(t.outstanding_count() == 2);
}

TEST_CASE("transfer_tracker: a block written twice in one batch splits the kind's transfer",
          "[controller][tracker]") {
  // Host block 5 receives a write-back, is freed (its node dropped) and handed to another
  // write-back in the same commit. In one transfer the two copies could run in either order, and
  // the transfer would wait for itself.
  transfer_tracker t(1);
  std::vector<transfer> out;
  t.batch({order(1, transfer_kind::write_back, 1, 5), order(2, transfer_kind::write_back, 2, 6),
           order(3, transfer_kind::write_back, 3, 5)},
          out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].blocks.size() == 2);
  CHECK(out[1].blocks.size() == 1);
  CHECK(out[1].blocks[0].device_block == 3);
  for (const transfer& x : out)
    CHECK(std::find(x.after.begin(), x.after.end(), x.id) == x.after.end());
  CHECK(out[1].after == std::vector<uint64_t>{out[0].id});
  // Reading a block twice in one transfer is fine.
  std::vector<transfer> reads;
  t.batch({order(4, transfer_kind::store, 0, 8), order(5, transfer_kind::store, 0, 8)}, reads);
  CHECK(reads.size() == 1);
}

TEST_CASE("transfer_tracker: a host block stored and handed out again in one batch is read first",
          "[controller][tracker]") {
  // storage_write=on_host_evict: host block 7's copy is evicted to storage, and the block goes
  // to a load and host block 8's to a backup of the same commit. The stores read the old copies
  // before the new ones are written, whatever the kinds' order.
  transfer_tracker t(1);
  std::vector<transfer> out;
  t.batch({order(1, transfer_kind::store, 0, 7), order(2, transfer_kind::load, 0, 7),
           order(3, transfer_kind::store, 0, 8), order(4, transfer_kind::backup, 2, 8)},
          out);
  REQUIRE(out.size() == 3);
  CHECK(out[0].kind == transfer_kind::store);
  CHECK(out[0].blocks.size() == 2);
  CHECK(out[0].after.empty());
  for (size_t i = 1; i < out.size(); ++i) {
    CHECK(out[i].kind != transfer_kind::store);
    CHECK(out[i].after == std::vector<uint64_t>{out[0].id});
  }
}
