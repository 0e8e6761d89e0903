#pragma once

// What a transfer does: the one name for a copy, from the cache model's orders through the
// controller's messages to the transfer engine's report. The model issues the first five; the
// controller adds fill under --verify. A transfer carries one kind: the controller never batches
// two kinds together (model/controller/transfer_tracker.hpp).

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvtier {

enum class transfer_kind : uint8_t {
  backup,      ///< device -> host of a block that stays on device (write-through, handoffs)
  write_back,  ///< device -> host of an evicted device block (write-back)
  swap_in,     ///< host -> device of a host hit, layer by layer
  load,        ///< storage -> host of a storage hit
  store,       ///< host -> storage
  fill,        ///< --verify: a step produced these device blocks; mark each with its pattern
};
inline constexpr size_t transfer_kind_count = 6;

/// One value per kind (the engine's counts), in the order of the enum.
template <class T>
using per_transfer_kind = std::array<T, transfer_kind_count>;

template <class T>
constexpr T& at(per_transfer_kind<T>& values, transfer_kind k) {
  return values[static_cast<size_t>(k)];
}
template <class T>
constexpr const T& at(const per_transfer_kind<T>& values, transfer_kind k) {
  return values[static_cast<size_t>(k)];
}

/// The device -> host copies: one link, one report line (d2h), whatever asked for them.
constexpr bool is_d2h(transfer_kind k) {
  return k == transfer_kind::backup || k == transfer_kind::write_back;
}

/// Copies between device and host memory: the copy backend's (actors/transfer_engine/).
constexpr bool is_pcie(transfer_kind k) {
  return is_d2h(k) || k == transfer_kind::swap_in;
}

constexpr const char* to_string(transfer_kind k) {
  switch (k) {
    case transfer_kind::backup: return "backup";
    case transfer_kind::write_back: return "write_back";
    case transfer_kind::swap_in: return "swap_in";
    case transfer_kind::load: return "load";
    case transfer_kind::store: return "store";
    case transfer_kind::fill: return "fill";
  }
  return "?";
}

}  // namespace kvtier
