#pragma once

// The reply to step and its shorthands (docs/protocol.md): the controller's grant, encoded by
// the server actor and decoded by the client stub, and real mode's swap-in slot.

#include <cstdint>
#include <optional>
#include <vector>

#include <msgpack.hpp>

#include "model/messages.hpp"
#include "core/run_modes.hpp"
#include "gpu/kv_cache.hpp"

namespace kvtier::serve {

/// Real mode: a step's swap-in into the engine's tensors, covered by the IPC events of `slot`
/// (one per layer); each block as [device block, the key its verify pattern is drawn from].
struct swap_in_slot {
  uint32_t slot = 0;
  uint32_t layers = 0;
  std::vector<gpu::block_pattern> blocks;
};

struct step_answer {
  /// On the wire: `step` (the engine's), `admits`, `failed_grows` (with the engine's request
  /// ids), `available_blocks` and `layer_ready_ns` (the server's clock). Not on it: `swap_in`
  /// (a transfer id of the server's) and the dropped keys (no PD through the protocol).
  grant granted;
  int64_t now_ns = 0;            ///< the server's clock at the reply
  std::optional<swap_in_slot> swap_in;  ///< real mode: none when the step swaps nothing in
  /// Version 3, per admission in `granted.admits`' order: the engine's device blocks kvtier
  /// loads into (its host and storage hits), each admit's `load_blocks`. Empty: not version 3.
  std::vector<std::vector<uint32_t>> load_blocks;
};

/// A real-mode server (`backend` cuda) always sends `swap_in` (nil when there is none); a
/// modelled one never does.
void encode_step_reply(msgpack::sbuffer& buf, uint64_t id, const step_answer& a,
                       copy_backend_kind backend);
step_answer decode_step_reply(const msgpack::object& reply);

/// [[device block, pattern key], ...] (step's swap_in and bench_swap's `blocks`).
void pack_block_patterns(msgpack::packer<msgpack::sbuffer>& out,
                         const std::vector<gpu::block_pattern>& blocks);
/// The inverse; entries of another shape are an error (wire::field_error).
std::vector<gpu::block_pattern> block_patterns(const msgpack::object& blocks);

}  // namespace kvtier::serve
