#pragma once

// The codec tests' round trip (codec_test.cpp, codec_calls_test.cpp).

#include <catch2/catch.hpp>

#include <cstdint>

#include "serve/wire/fields.hpp"

namespace kvtier::serve::test {

// Encodes with `encode`, checks the common keys and hands the decoded map to `check`.
template <class Encode, class Check>
void round_trip(uint64_t id, Encode encode, Check check) {
  msgpack::sbuffer buf;
  encode(buf, id);
  msgpack::object_handle h = msgpack::unpack(buf.data(), buf.size());
  const msgpack::object& root = h.get();
  REQUIRE(root.type == msgpack::type::MAP);
  CHECK(wire::u64(root, "id") == id);
  CHECK(wire::flag(root, "ok"));
  check(root);
}

}  // namespace kvtier::serve::test
