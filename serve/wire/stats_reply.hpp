#pragma once

// The reply to stats (docs/protocol.md): the server's counters, the controller's report (its
// invariant checks run for it) and the storage pool's, encoded by the server actor and decoded
// by the client stub.

#include <array>
#include <cstdint>

#include <msgpack.hpp>

#include "model/messages.hpp"
#include "serve/wire/call.hpp"

namespace kvtier::serve {

struct stats_answer {
  uint64_t engines = 0;   ///< registered
  uint64_t requests = 0;  ///< live
  std::array<uint64_t, verb_count> calls{};        ///< answered, per verb
  std::array<uint64_t, error_kind_count> errors{};  ///< per error kind
  /// On the wire: used blocks, tree nodes, copy counts, evictions, invariant violations and
  /// copies in flight; not the rest of the report.
  controller_report controller;
  /// On the wire: stored, capacity, rebuilt, misses, backend.
  storage_report storage;
  int64_t now_ns = 0;
  /// Connections refused at the handshake (CURVE: a plaintext client, another server key, a
  /// client key not listed).
  uint64_t refused_connections = 0;
};

void encode_stats_reply(msgpack::sbuffer& buf, uint64_t id, const stats_answer& a);
stats_answer decode_stats_reply(const msgpack::object& reply);

}  // namespace kvtier::serve
