// The protocol's decoder and block identity, without a server.

#include <catch2/catch.hpp>

#include "core/block_hash.hpp"
#include "serve/wire/call.hpp"
#include "serve/wire/map_writer.hpp"

using namespace kvtier;
using namespace kvtier::serve;

namespace {

std::string frame(const std::function<void(msgpack::packer<msgpack::sbuffer>&)>& write) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  write(pk);
  return std::string(buf.data(), buf.size());
}

std::optional<wire_error> decode(const std::string& bytes, call& c) {
  return decode_call(bytes.data(), bytes.size(), c);
}

}  // namespace

TEST_CASE("block hash known answers (docs/protocol.md)", "[serve][protocol]") {
  // Engines that hash as docs/protocol.md says must get these values.
  const int32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<cache_block> blocks;
  map_token_blocks(tokens, 8, 4, blocks);
  REQUIRE(blocks.size() == 2);
  CHECK(blocks[0].hash == 10958146518639993373ull);
  CHECK(blocks[1].hash == 15807938886453248189ull);
  CHECK(blocks[0].hash == hash_token_block(0, tokens, 4));
  CHECK(blocks[1].hash == hash_token_block(blocks[0].hash, tokens + 4, 4));
  // a partial tail is no block
  blocks.clear();
  map_token_blocks(tokens, 7, 4, blocks);
  CHECK(blocks.size() == 1);
  // extra keys change every block
  const uint64_t extra[1] = {42};
  CHECK(hash_token_block(0, tokens, 4, extra, 1) != blocks[0].hash);
}

TEST_CASE("the decoder reads every verb's fields", "[serve][protocol]") {
  call c;
  auto bytes = frame([](auto& pk) {
    pk.pack_map(5);
    pk.pack(std::string("op")); pk.pack(std::string("step"));
    pk.pack(std::string("id")); pk.pack(9);
    pk.pack(std::string("engine")); pk.pack(3);
    pk.pack(std::string("step")); pk.pack(12);
    pk.pack(std::string("admits"));
    pk.pack(std::vector<std::vector<uint64_t>>{{4, 100}, {5, 64}});
  });
  REQUIRE_FALSE(decode(bytes, c));
  CHECK(c.op == verb::step);
  CHECK(c.id == 9);
  CHECK(c.engine == 3u);
  CHECK(c.step.step == 12);
  REQUIRE(c.step.admits.size() == 2);
  CHECK(c.step.admits[1].req == 5);
  CHECK(c.step.admits[1].tokens == 64);
  bytes = frame([](auto& pk) {
    pk.pack_map(3);
    pk.pack(std::string("op")); pk.pack(std::string("allocate"));
    pk.pack(std::string("req")); pk.pack(7);
    pk.pack(std::string("blocks"));
    pk.pack(std::vector<std::vector<uint64_t>>{{11, 64}, {12, 10}});
  });
  REQUIRE_FALSE(decode(bytes, c));
  CHECK(c.text.kind == prompt::form::blocks);
  CHECK(c.text.blocks[1].hash == 12);
  CHECK(c.text.blocks[1].tokens == 10);
}

TEST_CASE("the decoder names what is wrong", "[serve][protocol]") {
  call c;
  auto err = [&](const std::string& bytes) {
    auto e = decode(bytes, c);
    REQUIRE(e);
    return std::string(error_name(e->kind)) + ": " + e->message;
  };
  CHECK_THAT(err(""), Catch::StartsWith("malformed: not a msgpack"));
  CHECK_THAT(err(frame([](auto& pk) { pk.pack(1); })), Catch::Contains("must be a msgpack map"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(1);
               pk.pack(std::string("id")); pk.pack(4);
             })),
             Catch::Contains("has no 'op'"));
  CHECK(c.id == 4);  // the id is read first, for the error reply
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(1);
               pk.pack(std::string("op")); pk.pack(std::string("jump"));
             })),
             Catch::Equals("unknown_op: unknown op 'jump'"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(2);
               pk.pack(std::string("op")); pk.pack(std::string("commit"));
               pk.pack(std::string("req")); pk.pack(-1);
             })),
             Catch::Contains("'req' must be an unsigned integer"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(2);
               pk.pack(std::string("op")); pk.pack(std::string("commit"));
               pk.pack(std::string("req")); pk.pack(1);
             })),
             Catch::Contains("'commit' needs 'tokens'"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(3);
               pk.pack(std::string("op")); pk.pack(std::string("lookup"));
               pk.pack(std::string("hashes")); pk.pack(std::vector<uint64_t>{1});
               pk.pack(std::string("tokens")); pk.pack(std::vector<int32_t>{1});
             })),
             Catch::Contains("not several"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(2);
               pk.pack(std::string("op")); pk.pack(std::string("step"));
               pk.pack(std::string("step")); pk.pack(uint64_t{1});
               pk.pack(std::string("x"));
             }).substr(0, 8)),
             Catch::StartsWith("malformed"));
  // deep nesting is refused by the unpacker's limits, not by the stack
  std::string deep(64, '\x91');
  deep += '\x01';
  CHECK_THAT(err(deep), Catch::StartsWith("malformed"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(1);
               pk.pack(std::string("op")); pk.pack(std::string("ping"));
             }) + "x"),
             Catch::Contains("trailing bytes"));
}

namespace {

// A hello frame whose `tensors` has `layers` handles of `handle_bytes` bytes and `events`
// event handles; `drop` leaves that key of `tensors` out.
std::string hello_with_tensors(uint32_t layers, uint32_t handle_bytes, uint32_t events,
                               const std::string& drop = "") {
  return frame([&](auto& pk) {
    pk.pack_map(5);
    pk.pack(std::string("op")); pk.pack(std::string("hello"));
    pk.pack(std::string("versions")); pk.pack(std::vector<uint32_t>{2});
    pk.pack(std::string("block_size")); pk.pack(64);
    pk.pack(std::string("model"));
    pk.pack_map(5);
    pk.pack(std::string("name")); pk.pack(std::string("m"));
    pk.pack(std::string("layers")); pk.pack(layers);
    pk.pack(std::string("kv_heads")); pk.pack(8);
    pk.pack(std::string("head_dim")); pk.pack(128);
    pk.pack(std::string("kv_dtype")); pk.pack(std::string("bf16"));
    pk.pack(std::string("tensors"));
    pk.pack_map(drop.empty() ? 4 : 3);
    std::string handle(handle_bytes, '\x07');
    if (drop != "device_blocks") {
      pk.pack(std::string("device_blocks")); pk.pack(100);
    }
    if (drop != "layers") {
      pk.pack(std::string("layers"));
      pk.pack_array(layers);
      for (uint32_t l = 0; l < layers; ++l) {
        pk.pack_array(2);
        pk.pack_bin(handle_bytes);
        pk.pack_bin_body(handle.data(), handle_bytes);
        pk.pack(uint64_t{l} * 4096);
      }
    }
    if (drop != "event_slots") {
      pk.pack(std::string("event_slots")); pk.pack(2);
    }
    if (drop != "events") {
      pk.pack(std::string("events"));
      pk.pack_array(events);
      std::string event_handle(ipc_handle_size, '\x09');  // always well-sized: `handle` may not be
      for (uint32_t e = 0; e < events; ++e) {
        pk.pack_bin(ipc_handle_size);
        pk.pack_bin_body(event_handle.data(), ipc_handle_size);
      }
    }
  });
}

}  // namespace

TEST_CASE("the decoder reads hello's tensors (real mode, version 2)", "[serve][protocol]") {
  call c;
  REQUIRE_FALSE(decode(hello_with_tensors(3, 64, 6), c));
  CHECK(c.op == verb::hello);
  REQUIRE(c.tensors.present);
  CHECK(c.tensors.device_blocks == 100);
  REQUIRE(c.tensors.layer_handles.size() == 3);
  CHECK(c.tensors.layer_handles[2][63] == 7);
  CHECK(c.tensors.layer_offsets == std::vector<uint64_t>{0, 4096, 8192});
  CHECK(c.tensors.event_slots == 2);
  CHECK(c.tensors.events.size() == 6);
  // A hello without tensors has none.
  call plain;
  REQUIRE_FALSE(decode(frame([](auto& pk) {
                         pk.pack_map(4);
                         pk.pack(std::string("op")); pk.pack(std::string("hello"));
                         pk.pack(std::string("versions")); pk.pack(std::vector<uint32_t>{1});
                         pk.pack(std::string("block_size")); pk.pack(64);
                         pk.pack(std::string("model"));
                         pk.pack_map(5);
                         pk.pack(std::string("name")); pk.pack(std::string("m"));
                         pk.pack(std::string("layers")); pk.pack(3);
                         pk.pack(std::string("kv_heads")); pk.pack(8);
                         pk.pack(std::string("head_dim")); pk.pack(128);
                         pk.pack(std::string("kv_dtype")); pk.pack(std::string("bf16"));
                       }),
                       plain));
  CHECK_FALSE(plain.tensors.present);
}

TEST_CASE("the decoder refuses bad IPC handles and incomplete tensors", "[serve][protocol]") {
  call c;
  auto err = [&](const std::string& bytes) {
    auto e = decode(bytes, c);
    REQUIRE(e);
    return std::string(error_name(e->kind)) + ": " + e->message;
  };
  CHECK_THAT(err(hello_with_tensors(3, 63, 6)),
             Catch::Equals("malformed: 'tensors.layers[0]' holds 63 bytes; a CUDA IPC handle "
                           "has 64"));
  CHECK_THAT(err(hello_with_tensors(3, 65, 6)), Catch::Contains("holds 65 bytes"));
  CHECK_THAT(err(hello_with_tensors(3, 0, 6)), Catch::Contains("holds 0 bytes"));
  for (const char* key : {"device_blocks", "layers", "event_slots", "events"})
    CHECK_THAT(err(hello_with_tensors(3, 64, 6, key)),
               Catch::Equals(std::string("malformed: 'tensors' lacks '") + key + "'"));
  // A handle sent as a string, not binary.
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(2);
               pk.pack(std::string("op")); pk.pack(std::string("hello"));
               pk.pack(std::string("tensors"));
               pk.pack_map(1);
               pk.pack(std::string("events"));
               pk.pack_array(1);
               pk.pack(std::string(64, 'x'));
             })),
             Catch::Contains("'tensors.events[0]' must be binary"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(2);
               pk.pack(std::string("op")); pk.pack(std::string("hello"));
               pk.pack(std::string("tensors")); pk.pack(1);
             })),
             Catch::Contains("'tensors' must be a map"));
  // bench_swap: a block count, repeats in range.
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(1);
               pk.pack(std::string("op")); pk.pack(std::string("bench_swap"));
             })),
             Catch::Contains("'bench_swap' needs 'blocks'"));
  CHECK_THAT(err(frame([](auto& pk) {
               pk.pack_map(3);
               pk.pack(std::string("op")); pk.pack(std::string("bench_swap"));
               pk.pack(std::string("blocks")); pk.pack(8);
               pk.pack(std::string("repeats")); pk.pack(0);
             })),
             Catch::Contains("'repeats' must be in [1, 1000]"));
}
