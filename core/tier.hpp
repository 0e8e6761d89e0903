#pragma once

// The three tiers a block can live in, lowest latency first (docs/design.md, "Layout"): the
// device (GPU memory), the host (pinned CPU memory) and the storage pool. One spelling for
// every per-tier figure: a per_tier array indexed by a tier, and one set of names.

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvtier {

enum class tier : uint8_t { device, host, storage };
inline constexpr size_t tier_count = 3;

/// Every tier, in index order (for loops over a per_tier array).
inline constexpr std::array<tier, tier_count> all_tiers = {tier::device, tier::host,
                                                           tier::storage};

/// One value per tier, in the order of the enum.
template <class T>
using per_tier = std::array<T, tier_count>;

constexpr size_t index_of(tier t) { return static_cast<size_t>(t); }

template <class T>
constexpr T& at(per_tier<T>& values, tier t) {
  return values[index_of(t)];
}
template <class T>
constexpr const T& at(const per_tier<T>& values, tier t) {
  return values[index_of(t)];
}

/// The name a report, a metric label or an event gives the tier.
constexpr const char* to_string(tier t) {
  constexpr per_tier<const char*> names = {"device", "host", "storage"};
  return names[index_of(t)];
}

}  // namespace kvtier
