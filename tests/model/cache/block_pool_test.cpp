#include "model/cache/block_pool.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

TEST_CASE("block_pool: allocation is all or nothing", "[pool]") {
  block_pool pool(4);
  std::vector<block_id> out;
  REQUIRE(pool.allocate(3, out));
  CHECK(out == std::vector<block_id>{0, 1, 2});
  CHECK_FALSE(pool.allocate(2, out));  // only one left: nothing is handed out
  CHECK(out.size() == 3);
  CHECK(pool.free_count() == 1);
  CHECK(pool.used_count() == 3);
  REQUIRE(pool.allocate(0, out));
  CHECK(out.size() == 3);
}

TEST_CASE("block_pool: released ids come back last in, first out", "[pool]") {
  block_pool pool(8);
  std::vector<block_id> out;
  REQUIRE(pool.allocate(4, out));
  pool.release(1);
  pool.release(3);
  out.clear();
  REQUIRE(pool.allocate(3, out));
  CHECK(out == std::vector<block_id>{3, 1, 4});  // then the first never-used id
}

TEST_CASE("block_pool: a block released under a transfer is retired until unpinned", "[pool]") {
  block_pool pool(2);
  std::vector<block_id> out;
  REQUIRE(pool.allocate(2, out));
  pool.pin(0);  // a D2H starts reading block 0
  pool.release(0);
  CHECK(pool.block_state(0) == block_pool::state::retired);
  CHECK(pool.free_count() == 0);
  CHECK(pool.retired_count() == 1);
  std::vector<block_id> more;
  CHECK_FALSE(pool.allocate(1, more));  // not free yet
  pool.unpin(0);
  CHECK(pool.block_state(0) == block_pool::state::free);
  REQUIRE(pool.allocate(1, more));
  CHECK(more == std::vector<block_id>{0});
}

TEST_CASE("block_pool: reuse of retired blocks is explicit and keeps the pins", "[pool]") {
  block_pool pool(3);
  std::vector<block_id> out;
  REQUIRE(pool.allocate(2, out));
  pool.pin(1);
  pool.release(1);
  std::vector<block_id> more;
  REQUIRE(pool.allocate(2, more, true));
  CHECK(more == std::vector<block_id>{2, 1});  // the free block first, then the retired one
  CHECK(pool.pins(1) == 1);  // its new owner must wait for this before writing
  CHECK(pool.block_state(1) == block_pool::state::used);
  pool.unpin(1);
  CHECK(pool.block_state(1) == block_pool::state::used);
  CHECK(pool.free_count() + pool.used_count() + pool.retired_count() == pool.capacity());
}

TEST_CASE("block_pool: reset frees everything", "[pool]") {
  block_pool pool(3);
  std::vector<block_id> out;
  REQUIRE(pool.allocate(3, out));
  pool.reset();
  CHECK(pool.free_count() == 3);
  out.clear();
  REQUIRE(pool.allocate(3, out));
  CHECK(out == std::vector<block_id>{0, 1, 2});
}

TEST_CASE("huge page allocator: large tables 2 MiB-aligned, contents kept as they grow",
          "[pool]") {
  std::vector<uint64_t, huge_page_allocator<uint64_t>> v;
  for (uint64_t i = 0; i < (uint64_t{3} << 20) / sizeof(uint64_t); ++i)
    v.push_back(i * 7);
  REQUIRE(v.capacity() * sizeof(uint64_t) >= huge_page_bytes);
  REQUIRE(reinterpret_cast<uintptr_t>(v.data()) % huge_page_bytes == 0);
  for (uint64_t i = 0; i < v.size(); ++i)
    REQUIRE(v[i] == i * 7);
  std::vector<uint32_t, huge_page_allocator<uint32_t>> small(100, 5u);
  REQUIRE(small.size() == 100);
  REQUIRE(small[99] == 5u);
  // A block pool of many blocks keeps its states in such a table.
  block_pool pool(1u << 20);
  std::vector<block_id> out;
  REQUIRE(pool.allocate(1u << 19, out));
  REQUIRE(pool.used_count() == (1u << 19));
}
