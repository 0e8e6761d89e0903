#include "actors/messages.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

// Through CAF's binary serializer and back, as a message to another node would travel.
template <class T>
T round_trip(const T& x) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::vector<char> buf;
  caf::binary_serializer out{sys, buf};
  T copy = x;
  REQUIRE_FALSE(out(copy));
  T back;
  caf::binary_deserializer in{sys, buf};
  REQUIRE_FALSE(in(back));
  return back;
}

}  // namespace

TEST_CASE("messages: enum fields travel as their enum", "[actors][messages]") {
  transfer t;
  t.id = 9;
  t.kind = transfer_kind::write_back;
  t.blocks.push_back({1, 2, 3, 4});
  transfer back = round_trip(t);
  CHECK(back.kind == transfer_kind::write_back);
  CHECK(back.blocks.size() == 1);
  CHECK(caf::deep_to_string(t).find("write_back") != std::string::npos);

  CHECK(round_trip(preallocate_reply{5, preallocation_verdict::no_slot, 7}).verdict
        == preallocation_verdict::no_slot);
  kv_handoff k;
  k.outcome = handoff_outcome::cancelled;
  CHECK(round_trip(k).outcome == handoff_outcome::cancelled);
  CHECK(caf::deep_to_string(k).find("cancelled") != std::string::npos);
  transfer_log l{3, transfer_kind::fill, 1, 10};
  CHECK(round_trip(l).kind == transfer_kind::fill);
}
