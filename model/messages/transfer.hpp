#pragma once

// A cache controller's messages to its transfer engine (docs/design.md, "Layout"). Plain structs
// of ids and integers, with no CAF: the CAF-free cores (model/) take and return them, and
// actors/messages.hpp gives them their inspect() overloads, type IDs and the actors' typed
// interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/ids.hpp"

namespace kvtier {

// -- cache controller -> transfer engine -------------------------------------------------------------

enum class move_kind : uint8_t {
  swap_in = 0,  ///< host -> device, layer by layer
  d2h = 1,      ///< device -> host, all layers at once (backups and write-backs)
  load = 2,     ///< storage -> host
  store = 3,    ///< host -> storage
  fill = 4,     ///< --verify: a step produced these device blocks; mark each with its pattern
};
inline constexpr int move_kinds = 5;

struct block_move {
  uint32_t device_block = 0;
  uint32_t host_block = 0;
  block_hash hash = 0;
  uint64_t storage_key = 0;
};

/// One batched transfer. It starts once every transfer in `after` is done (an earlier copy still
/// reads a block this one writes).
struct transfer {
  uint64_t id = 0;
  uint8_t kind = 0;  ///< move_kind
  std::vector<block_move> blocks;
  std::vector<uint64_t> after;
};

struct transfer_done {
  uint64_t id = 0;
  bool ok = true;
  int64_t done_ns = 0;
  std::vector<int64_t> layer_done_ns;  ///< swap-ins: when each layer was in device memory
  std::string error;
};

}  // namespace kvtier
