#pragma once

// The seeded fault "a PD handoff fails" (pd.failure_rate): whether request `req`'s handoff fails
// is a pure function of the run's seed and the request, so it does not depend on the order in
// which messages are handled, and one seed reproduces one run.

#include <cstdint>

namespace kvtier {

inline bool handoff_fails(uint64_t seed, uint64_t req, double rate) {
  if (rate <= 0)
    return false;
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + req + 0x632be59bd9b4e019ULL;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 < rate;
}

}  // namespace kvtier
