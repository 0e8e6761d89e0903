#pragma once

// What the engine session's tests share (engine_session_test.cpp,
// engine_session_reference_test.cpp).

#include <cstdint>
#include <vector>

#include "model/session/engine_session.hpp"

namespace kvtier::session::test {

inline std::vector<cache_block> prompt(uint32_t blocks, uint64_t seed = 1) {
  std::vector<cache_block> out;
  for (uint32_t i = 0; i < blocks; ++i)
    out.push_back({seed * 1000 + i, 64});
  return out;
}

inline invariant_report checked(const engine_session& s) {
  invariant_report r;
  s.check(r);
  return r;
}

}  // namespace kvtier::session::test
