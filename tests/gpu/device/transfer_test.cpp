// Every method, both directions, on scattered blocks with runs and singles mixed: destinations
// are poisoned first, and afterwards every byte of every block (destinations and the rest) is
// checked against the pattern it must hold.

#include <cstring>

#include <catch2/catch.hpp>

#include "support.hpp"

using namespace kvtier::gpu;
using namespace kvtier::gpu::test;

namespace {

constexpr transfer_method methods[] = {transfer_method::per_chunk, transfer_method::batched,
                                       transfer_method::staging, transfer_method::zero_copy};

struct setup {
  const char* name;
  kv_layout shape;  ///< sizes only
  uint32_t blocks;  ///< device and host pool each
  uint32_t pairs;
  uint64_t slot_bytes;
  uint64_t direct_min_bytes;
};

void poison_devices(kv_cache& c, const std::vector<block_pair>& pairs) {
  std::vector<uint32_t> blocks;
  for (const block_pair& p : pairs)
    blocks.push_back(p.device);
  c.poison_device_blocks(blocks, 0xa5);
  c.synchronize();
}

void poison_hosts(kv_cache& c, const std::vector<block_pair>& pairs) {
  for (const block_pair& p : pairs)
    std::memset(c.host_block(p.host), 0x5a, c.layout().host_block_bytes());
}

/// Every method, both host placements, both directions on one cache.
void check_every_method(const setup& s, uint64_t seed) {
  kv_cache_config cfg = make_config(s.shape, s.blocks, s.blocks);
  cfg.staging_slot_bytes = s.slot_bytes;
  cfg.staging_slots = 2;
  cfg.direct_min_bytes = s.direct_min_bytes;
  auto cache = make_kv_cache(cfg);
  kv_cache& c = *cache;
  for (transfer_method m : methods) {
    for (bool host_consecutive : {true, false}) {
      auto pairs = scattered_pairs(seed++, s.pairs, c.layout(), host_consecutive);
      INFO(s.name << ", " << to_string(m)
                  << (host_consecutive ? ", host range" : ", host scattered"));
      fill_every_host_block(c);
      fill_every_device_block(c);
      poison_devices(c, pairs);
      op_id h2d = c.submit_h2d(pairs, m);
      c.wait(h2d);
      c.release(h2d);
      CHECK(check_devices_after_h2d(c, pairs) == "");
      fill_every_device_block(c);
      poison_hosts(c, pairs);
      op_id d2h = c.submit_d2h(pairs, m);
      c.wait(d2h);
      c.release(d2h);
      CHECK(check_hosts_after_d2h(c, pairs) == "");
    }
  }
}

}  // namespace

TEST_CASE("transfers: every method moves every byte, both directions", "[gpu][transfer]") {
  kv_layout small = small_shape();
  kv_layout llama = llama_shape(16);
  // Slots of 3 slices: many slots, slot ends inside blocks; runs of 4+ chunks go direct.
  check_every_method({"small, tight slots", small, 96, 40, 3 * small.slice_bytes(),
                      4 * small.chunk_bytes()}, 100);
  check_every_method({"llama, default slots", llama, 48, 20, 16ull << 20, 8ull << 20}, 200);
  check_every_method({"llama, 1 MiB slots, runs of 2+ direct", llama, 48, 20, 1ull << 20,
                      2 * llama.chunk_bytes()}, 300);
}

TEST_CASE("transfers: chunks of several kernel pieces, the last one partial", "[gpu][transfer]") {
  kv_layout odd = layout_of(3, 3, 128, 48, 2);  // 36 KiB chunks: 16 + 16 + 4 KiB pieces
  check_every_method({"36 KiB chunks", odd, 40, 17, 5 * odd.slice_bytes(), 0}, 400);
}

TEST_CASE("transfers: single blocks and an empty list", "[gpu][transfer]") {
  auto cache = make_kv_cache(make_config(small_shape(), 16, 16));
  kv_cache& c = *cache;
  for (transfer_method m : methods) {
    INFO(to_string(m));
    std::vector<block_pair> one{{9, 3}};
    fill_every_host_block(c);
    fill_every_device_block(c);
    poison_devices(c, one);
    c.release(c.submit_h2d(one, m));
    CHECK(check_devices_after_h2d(c, one) == "");
    for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h}) {
      op_id id = d == transfer_direction::h2d ? c.submit_h2d({}, m) : c.submit_d2h({}, m);
      c.wait(id);
      CHECK(c.layer_done(id));
      CHECK(c.transfer_time(id).bytes == 0);
      c.release(id);
    }
  }
}

TEST_CASE("transfers: the bulk reference copies bytes verbatim", "[gpu][transfer]") {
  auto cache = make_kv_cache(make_config(small_shape(), 8, 8));
  kv_cache& c = *cache;
  fill_every_host_block(c);
  uint64_t bytes = 2 * c.layout().host_block_bytes();
  // Host blocks 0 and 1 onto the start of the device arena, then back onto host blocks 4 and 5.
  c.release(c.submit_bulk(transfer_direction::h2d, bytes, 0, 0));
  uint64_t fifth = 4 * c.layout().host_block_bytes();
  c.release(c.submit_bulk(transfer_direction::d2h, bytes, 0, fifth));
  CHECK(std::memcmp(c.host_block(0), c.host_block(4), bytes) == 0);
}
