#pragma once

// Where the storage pool keeps block payloads: the byte-carrying side of the storage actor.
//
// The storage actor keeps the pool's metadata (storage_index: which blocks, capacity, LRU per
// node, leases) and asks a backend to move the bytes. A backend takes batches (exists / get / put
// / remove) and answers each batch once, through its completion callback, which may run on the
// backend's own I/O thread or, for a backend that never blocks (memory), inline. The actor turns
// each completion into a message to itself, so no actor thread ever waits for I/O.
//
// Blocks are named by their block hash inside a namespace of model name and KV dtype
// (block_name), and placed on node `node_of_key(storage key)`: the same routing the modelled nodes
// and the index use, so every block has one home node.
//
// Invariants every backend keeps:
// - a block is visible (exists, get) only once all of its bytes are written: no torn block is
//   ever returned;
// - a get returns exactly the bytes a put stored, or nothing: it writes them into memory its
//   caller owns (block_span), and a block whose stored length is not the span's is a miss;
// - a put that fails leaves the block absent (parts already written are rolled back);
// - a node that cannot be reached answers as empty: gets miss, puts fail (and are counted);
// - a remove says, per block, whether the block is gone (deleted, or it was not there) or the
//   delete could not run (its node out of reach): the pool retries that one, or its next
//   reconcile finds it (docs/robustness.md, "Nothing left behind");
// - a listing names only blocks of its own namespace ("kvtier:<model>:<dtype>:"), and says which
//   nodes it listed completely: what it could not reach is neither lost nor orphaned.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/redis_access.hpp"

namespace kvtier {

using block_bytes_t = std::vector<uint8_t>;

/// Where a get puts one block's bytes: `size` bytes the caller owns (a host-tier block, a buffer
/// of a pool), written by the backend, possibly on its I/O thread, and neither read nor freed by
/// the caller until the get's completion has run. After a miss its contents are unspecified.
/// Reading into the caller's memory is what keeps a get to one pass over the bytes: no buffer per
/// block is allocated, zeroed, handed over and copied again into the place it was needed.
struct block_span {
  uint8_t* data = nullptr;
  uint64_t size = 0;
};

/// A block as the storage layer addresses it: its storage key (routing, index) and its block hash
/// (the name it has in a backend).
struct block_ref {
  uint64_t key = 0;
  uint64_t hash = 0;
};

/// The node a storage key lives on (the index and every backend use this one rule).
inline uint32_t node_of_key(uint64_t key, uint32_t nodes) {
  // One node is the usual pool: no division (tens of cycles) on every storage operation.
  return nodes == 1 ? 0 : static_cast<uint32_t>((key >> 32) % nodes);
}

/// The namespace blocks are named in: different models or KV dtypes never share a block.
struct block_namespace {
  std::string model = "model";
  std::string dtype = "bf16";
};

/// "kvtier:<model>:<dtype>:<hash as 16 hex digits>": a backend's name for a block (plus a part
/// suffix where a backend stores a block in pieces).
std::string block_name(const block_namespace& ns, uint64_t hash);
/// The hash back from a block_name of this namespace (and any part suffix); nullopt if the name is
/// not one of this namespace's blocks.
std::optional<uint64_t> hash_of_block_name(const block_namespace& ns, const std::string& name);

/// What a listing found.
struct block_listing {
  std::vector<uint64_t> blocks;   ///< blocks held whole
  /// Blocks of which only some parts are there (a put cut short whose rollback could not run):
  /// never answered as blocks, but they take room until deleted.
  std::vector<uint64_t> partial;
  /// Per node: 1 if every block on it was listed (0: it could not be reached, or stopped
  /// answering midway).
  std::vector<uint8_t> listed;
  bool complete() const {
    for (uint8_t l : listed)
      if (!l)
        return false;
    return true;
  }
};

/// Counters a backend keeps (read by the storage report).
struct backend_counters {
  uint64_t puts_ok = 0;
  uint64_t puts_failed = 0;      ///< blocks a put could not store (node down, disk full, error)
  uint64_t gets_hit = 0;
  uint64_t gets_missed = 0;      ///< blocks a get did not find (absent, node down, error)
  uint64_t rollbacks = 0;        ///< blocks whose written parts were removed after a failed part
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t removed = 0;
  uint64_t corrupt = 0;          ///< blocks read back damaged (checksum, length) or of another
                                 ///< length than the get's span: counted as misses
  uint64_t node_downs = 0;       ///< times a node was found unreachable
  uint64_t reconnects = 0;       ///< times a node came back
  uint64_t auth_failures = 0;    ///< connections whose credentials a node refused
  uint64_t tls_failures = 0;     ///< TLS handshakes with a node that failed
  int64_t busy_ns = 0;           ///< sum over batches of their service time (issue to answer)
  uint64_t batches = 0;
  std::string put_error;         ///< why the first put that failed did (empty: none failed)
};

class storage_backend {
 public:
  using exists_done = std::function<void(std::vector<bool> present)>;
  /// found[i]: block i's bytes, exactly `into[i].size` of them, are in `into[i]`.
  using get_done = std::function<void(std::vector<bool> found)>;
  using put_done = std::function<void(std::vector<bool> stored)>;
  /// gone[i]: block i is not in the backend now (deleted, or absent); false: its delete could
  /// not run (node out of reach) and the block may still be there.
  using remove_done = std::function<void(std::vector<bool> gone)>;
  using list_done = std::function<void(block_listing listing)>;

  virtual ~storage_backend() = default;

  virtual std::string name() const = 0;
  /// Whether completions come later on another thread (real I/O, wall clock only) or inline.
  virtual bool asynchronous() const = 0;
  uint32_t nodes() const { return nodes_; }

  virtual void exists(std::vector<block_ref> blocks, exists_done done) = 0;
  /// Reads block i into `into[i]` (one span per block).
  virtual void get(std::vector<block_ref> blocks, std::vector<block_span> into, get_done done) = 0;
  /// `payloads[i]` is the whole of block i.
  virtual void put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
                   put_done done) = 0;
  virtual void remove(std::vector<block_ref> blocks, remove_done done) = 0;
  /// Every block of this namespace the backend holds, on every reachable node: what a restarted
  /// pool rebuilds its index from, and what a reconcile compares the index with.
  virtual void list(list_done done) = 0;

  virtual backend_counters counters() const = 0;
  /// Whether node `n` can be reached now (a list leaves out what it cannot reach).
  virtual bool node_reachable(uint32_t) const { return true; }
  /// What a run should be told at start about how this backend behaves (empty: nothing).
  virtual std::string start_note() const { return {}; }

 protected:
  explicit storage_backend(uint32_t nodes) : nodes_(nodes) {}

 private:
  uint32_t nodes_;
};

/// Where stored blocks' bytes go (storage.backend): nowhere (`model`: the pool's timing is
/// modelled and no bytes are kept), this process's memory, Redis nodes, one Redis Cluster, or
/// files.
enum class storage_backend_kind : uint8_t { model, memory, redis, redis_cluster, file };

/// The config's spelling: "model", "memory", "redis", "redis_cluster", "file".
const char* to_string(storage_backend_kind k);
/// The kind `name` spells; nullopt for any other text.
std::optional<storage_backend_kind> parse_storage_backend_kind(const std::string& name);
/// Redis, a Redis Cluster and files do real I/O on their own threads: wall clock only.
bool does_real_io(storage_backend_kind k);

/// Which backend and how it reaches its nodes (the storage.* config keys).
struct backend_options {
  storage_backend_kind kind = storage_backend_kind::model;
  block_namespace ns;
  uint32_t nodes = 1;                   ///< memory: node count (redis, file: one per address/dir)
  std::vector<std::string> redis;       ///< host:port of each node
  std::vector<std::string> redis_cluster;  ///< host:port of seed nodes of one Redis Cluster
  uint32_t redis_ttl_s = 0;             ///< 0: keys live until the pool evicts them
  /// redis, redis_cluster: the credentials and TLS every connection uses (redis_dial.hpp).
  redis_access redis_auth;
  /// redis_cluster: how long a command waits for a failed master's slots to be served again
  /// before it fails; 0: from the cluster's own cluster-node-timeout (redis_cluster_backend.hpp).
  int64_t redis_failover_wait_ns = 0;
  std::vector<std::string> file_dirs;   ///< one directory per node
  bool file_direct = false;             ///< O_DIRECT writes and reads (aligned buffers)
  uint32_t file_threads = 4;
  /// Test hook (file backend): a node's files may hold this many bytes in all; a write beyond
  /// fails with ENOSPC, as a full disk would (0: no limit).
  uint64_t file_quota_bytes = 0;
};

/// The backend for `o.kind`; null for `model` (modelled timing, no bytes). Throws
/// std::invalid_argument naming what is wrong (an address that does not parse, a directory that
/// cannot be made).
std::unique_ptr<storage_backend> make_storage_backend(const backend_options& o);

}  // namespace kvtier
