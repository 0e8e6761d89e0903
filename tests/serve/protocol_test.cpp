// The protocol's decoder and block identity, without a server.

#include <catch2/catch.hpp>

#include "actors/cache_controller/block_hash.hpp"
#include "serve/call.hpp"
#include "serve/encode.hpp"

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
