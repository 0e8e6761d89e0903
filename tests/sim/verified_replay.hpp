#pragma once

// A replay against a real L3 that must end whole and verified: every request finished or
// rejected, every stored byte read back as written, no invariant broken, no lease or request
// left open, storage actually read (cluster_replay_test.cpp, fault_replay_test.cpp).

#include <cstdint>

#include <catch2/catch.hpp>

#include "sim/driver/replay_driver.hpp"

namespace kvtier::test {

inline void require_complete_and_verified(const replay_result& r, uint64_t requests) {
  const auto& s = r.summary;
  INFO(s["storage"].dump());
  INFO(r.first_violation);
  CHECK(s["requests"]["unfinished"] == 0);
  CHECK(s["requests"]["finished"].get<uint64_t>() + s["requests"]["rejected"].get<uint64_t>() ==
        requests);
  CHECK(s["storage"]["payload_errors"] == 0);
  CHECK(s["storage"]["corrupt"] == 0);
  CHECK(s["invariants"]["violations"] == 0);
  CHECK(s["storage"]["open_leases"] == 0);
  CHECK(s["storage"]["pending_requests"] == 0);
  CHECK(s["transfers"]["storage_loads"].get<uint64_t>() > 0);
  CHECK(s["storage"]["payload_bytes_read"].get<uint64_t>() > 0);
  CHECK_FALSE(r.failed());
}

}  // namespace kvtier::test
