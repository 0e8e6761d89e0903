#pragma once

// The storage actor: the L3 pool (one or several nodes) behind batch exists / get / put. It keeps
// which blocks are stored (storage_index: capacity, LRU per node, keys namespaced by model and
// dtype) and, with the modelled backend (`backend` null), models each node's media: every request
// pays an op latency (a put `op_latency_ns`; an exists or a get `read_op_latency_ns`, which is
// `op_latency_ns` unless set) and then moves its bytes at the node's read or write bandwidth,
// shared fairly with the other requests on that node. A get leases its keys (they cannot be
// evicted) until the transfer engine releases them.
//
// With a byte-carrying backend (storage_backend.hpp) a put's bytes travel in its message and the
// backend keeps them; a get's bytes are read straight into the memory its request names
// (storage_io::into, owned by the asker until the reply): `memory` still pays the modelled media
// time (it completes inline, so virtual time stays exact) and then stores or reads; `redis` and
// `file` do real I/O on their own threads (wall clock only) and their completions come back as
// messages, so the actor never waits. The index stays the pool's metadata either way: a put
// indexes what the backend stored and deletes the blocks its eviction chose; a get that finds an
// indexed block missing (its node went down or came back empty) drops it from the index and
// answers it as a miss.
//
// Puts are two-phase (storage_index::begin_put / end_put): a key becomes visible when its write
// ends, and only keys neither stored nor in flight are written (and pay media time). Faults
// (fault_plan) are applied at their instants: before a handler looks at anything later, and, while
// requests are in flight, on a timer of their own, so that a slow window ending speeds up the
// flows at the right time. A lost node's writes in flight end without a key; its gets in flight
// miss; a get already answered keeps what it read.

#include <cstdint>
#include <memory>
#include <optional>

#include "actors/messages.hpp"
#include "core/sim_clock.hpp"
#include "model/storage/fault_plan.hpp"
#include "storage/storage_backend.hpp"
#include "model/storage/storage_index.hpp"

namespace kvtier {

struct storage_options {
  uint64_t capacity_blocks = 0;
  uint32_t nodes = 1;
  double read_gbps = 10;   ///< per node
  double write_gbps = 5;   ///< per node
  int64_t op_latency_ns = 100'000;
  /// The read side's (exists, get) own latency: a file backend's get is an open and a read, its
  /// put a create, a write and a rename, so the two differ several-fold. Unset: `op_latency_ns`.
  std::optional<int64_t> read_op_latency_ns;
  int64_t read_latency_ns() const { return read_op_latency_ns.value_or(op_latency_ns); }
  /// One block's stream (a backend serves a request's blocks one per thread): a request moves
  /// at most this many GB/s per block it carries on a node, the node's bandwidth shared above
  /// that. 0: no cap (a lone block gets the whole node).
  double stream_read_gbps = 0;
  double stream_write_gbps = 0;
  sim_clock clock;
  /// Where the bytes go (null: modelled, no bytes). Shared so that a front end can keep one pool
  /// across actor restarts; its node count must equal `nodes`.
  std::shared_ptr<storage_backend> backend;
  /// The model/dtype namespace of storage keys (make_storage_key): a rebuild turns the block
  /// hashes a backend lists back into keys.
  uint64_t name_space = 0;
  /// Leases, eviction (storage.lease_ms, storage.eviction ...).
  storage_pool_policy pool;
  /// Seeded faults (faults.*); none by default. Deterministic on the virtual clock only.
  fault_options faults;
};

storage_actor spawn_storage(caf::actor_system& sys, const storage_options& options);

}  // namespace kvtier
