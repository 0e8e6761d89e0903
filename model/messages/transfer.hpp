#pragma once

// A cache controller's messages to its transfer engine (docs/design.md, "Layout"). Plain structs
// of ids and integers, with no CAF: the CAF-free cores (model/) take and return them, and
// actors/messages.hpp gives them their inspect() overloads, type IDs and the actors' typed
// interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/transfer_kind.hpp"
#include "model/messages/ids.hpp"

namespace kvtier {

// -- cache controller -> transfer engine -------------------------------------------------------------

struct block_move {
  uint32_t device_block = 0;
  uint32_t host_block = 0;
  block_hash hash = 0;
  uint64_t storage_key = 0;  ///< a store's or a load's: the block's key in storage (0 otherwise)
};

/// One batched transfer. It starts once every transfer in `after` is done (an earlier copy still
/// reads a block this one writes).
struct transfer {
  uint64_t id = 0;
  transfer_kind kind = transfer_kind::backup;
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
