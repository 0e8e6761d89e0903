#include "actors/transfer_engine/verified_copies.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace kvtier;

namespace {

// Blocks as plain memory: a block "holds its pattern" when its bytes equal {hash byte} x 4.
struct fake_memory : block_memory {
  std::map<uint32_t, block_hash> device;  // the hash each device block's bytes are of
  std::map<uint32_t, std::vector<uint8_t>> host;

  static std::vector<uint8_t> pattern(block_hash h) {
    return std::vector<uint8_t>(4, static_cast<uint8_t>(h));
  }
  void mark_device(const transfer& t) override {
    for (const block_move& b : t.blocks)
      device[b.device_block] = b.hash;
  }
  std::string check_device(const transfer& t) override {
    for (const block_move& b : t.blocks)
      if (device[b.device_block] != b.hash)
        return "device block " + std::to_string(b.device_block);
    return {};
  }
  std::string check_host(const block_move& b) override {
    return host[b.host_block] == pattern(b.hash) ? "" : "host block " + std::to_string(b.host_block);
  }
  std::vector<uint8_t> read_host(uint32_t block) override { return host[block]; }
  void write_host(uint32_t block, const std::vector<uint8_t>& bytes) override {
    host[block] = bytes;
  }
};

// A backend that copies nothing and reports each op done at once, with op = transfer id.
struct fake_backend : copy_backend {
  std::vector<uint64_t> started;
  std::string name() const override { return "fake"; }
  void expect(const transfer&) override {}
  void start(const transfer& t) override { started.push_back(t.id); }
  void on_device_event(uint64_t op, int32_t, copy_events& events) override {
    events.copy_done(op, 7, {});
  }
  std::vector<uint8_t> storage_payload(const block_move&, uint64_t) override { return {}; }
  std::vector<payload_destination> load_destinations(const transfer&, uint64_t) override {
    return {};
  }
  std::string loaded(const transfer&, uint64_t, bool) override { return {}; }
};

struct recorded : copy_events {
  std::map<uint64_t, std::string> done;
  void layer_done(uint64_t) override {}
  void copy_done(uint64_t id, int64_t, const std::string& error) override { done[id] = error; }
};

transfer make(uint64_t id, transfer_kind kind, uint32_t block, block_hash hash) {
  transfer t;
  t.id = id;
  t.kind = kind;
  t.blocks.push_back({block, block, hash, 100 + block});
  return t;
}

}  // namespace

TEST_CASE("verified_copies: a swap-in's device blocks are checked once it is done",
          "[actors][verify]") {
  auto inner = std::make_unique<fake_backend>();
  fake_backend& backend = *inner;
  fake_memory memory;
  verified_copies copies(std::move(inner), memory);
  CHECK(copies.name() == "fake");

  copies.fill(make(1, transfer_kind::fill, 3, 42));  // block 3 now holds hash 42's pattern
  transfer good = make(2, transfer_kind::swap_in, 3, 42);
  transfer bad = make(3, transfer_kind::swap_in, 4, 43);  // block 4 was never marked
  transfer out = make(4, transfer_kind::backup, 5, 44);   // not a swap-in: not checked
  for (const transfer* t : {&good, &bad, &out}) {
    copies.expect(*t);
    copies.start(*t);
  }
  CHECK(backend.started == std::vector<uint64_t>{2, 3, 4});
  recorded events;
  for (uint64_t op : {2, 3, 4})
    copies.on_device_event(op, -1, events);
  CHECK(events.done.at(2).empty());
  CHECK(events.done.at(3) == "device block 4");
  CHECK(events.done.at(4).empty());
}

TEST_CASE("verified_copies: modelled storage gets back the bytes a store read",
          "[actors][verify]") {
  fake_memory memory;
  verified_copies copies(std::make_unique<fake_backend>(), memory, 8);
  memory.host[1] = fake_memory::pattern(42);
  transfer store = make(1, transfer_kind::store, 1, 42);
  CHECK(copies.before_store(store).empty());

  memory.host[1].clear();  // the host block is reused; the load writes it back
  CHECK(copies.after_load(make(2, transfer_kind::load, 1, 42)).empty());
  CHECK(memory.host[1] == fake_memory::pattern(42));

  CHECK(copies.after_load(make(3, transfer_kind::load, 2, 43))
        == "verify: storage read block 43 that was never stored");
  memory.host[2] = memory.host[3] = fake_memory::pattern(9);
  CHECK(copies.before_store(make(4, transfer_kind::store, 2, 9)).empty());  // 8 bytes kept
  CHECK(copies.before_store(make(5, transfer_kind::store, 3, 9))
        == "verify: storage payloads exceed 8 bytes; replay fewer blocks with --verify");
}

TEST_CASE("verified_copies: a load's host blocks are checked only when every block came",
          "[actors][verify]") {
  fake_memory memory;
  verified_copies copies(std::make_unique<fake_backend>(), memory);
  memory.host[1] = fake_memory::pattern(1);  // not block hash 42's
  transfer load = make(1, transfer_kind::load, 1, 42);
  CHECK(copies.loaded(load, 4, true) == "after a storage read: host block 1");
  CHECK(copies.loaded(load, 4, false).empty());
  memory.host[1] = fake_memory::pattern(42);
  CHECK(copies.loaded(load, 4, true).empty());
}
