#pragma once

// The transfer engine's loads and stores without the actor: backpressure on the payload bytes
// in flight to or from storage, and the two parts every storage transfer waits for
// (docs/design.md, "Bytes in flight to storage"; actors/transfer_engine/ sends the messages).
//
// Backpressure: payload bytes go to or come from storage only while those not yet answered stay
// within the bound (one transfer's worth at least, so that something always moves). A store's
// blocks go in as many puts as room allows; a load goes whole. The rest wait, in order, as on a
// busy link to storage, holding no bytes: payloads and buffers are made when they go. So no
// backend queue, mailbox or thread pool ever holds more than the bound.
//
// Parts: a storage transfer's bytes cross the storage node's media and the host's network link
// at once (cut through), so it runs storage's request and a network flow together, both started
// with its first bytes, and ends once both have ended, failed if either failed. A load's storage
// part is its get's answer; a store's, the answer to its last put.
//
// A transfer's steps, each checked (any other order stops the run):
//   enqueue -> released (pump: whole for a load, put by put for a store) -> parts begun (with its
//   first bytes) -> each part ended once -> forgotten (the engine delivered it).

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/transfer_kind.hpp"

namespace kvtier {

enum class storage_part : uint8_t {
  answer,  ///< storage's answer: a load's get, a store's last put
  flow,    ///< the network flow on the host's link
};

/// Why a load or store failed.
enum class storage_fault : uint8_t {
  none,
  get_failed,        ///< the get was answered with an error
  put_failed,        ///< a put was answered with an error
  payload_mismatch,  ///< a loaded block's bytes were not what was stored
};

struct storage_failure {
  storage_fault fault = storage_fault::none;
  std::string detail;  ///< the error storage answered with, or what differed

  bool failed() const { return fault != storage_fault::none; }
  /// The transfer's error as the controller is told it ("" if nothing failed).
  std::string message() const;
};

/// What the queue lets go: a whole load (its buffers are held from now), or blocks
/// [from, from + count) of a store, as one put.
struct storage_grant {
  uint64_t id = 0;
  transfer_kind kind = transfer_kind::load;
  size_t from = 0;
  size_t count = 0;
  /// The transfer's first bytes go: its parts begin with them (begin_parts).
  bool first() const { return from == 0; }
};

/// Waits and the most bytes held (engine_report's store_waits, store_wait_ns,
/// storage_inflight_peak_bytes).
struct storage_traffic_counts {
  uint64_t waits = 0;
  int64_t wait_ns = 0;
  uint64_t inflight_peak_bytes = 0;
};

class storage_traffic {
 public:
  /// `payload_bytes`: the bytes of each block storage keeps (0: none, so nothing is bounded);
  /// `inflight_bound`: the payload bytes that may be in flight at once (0: no bound).
  storage_traffic(uint64_t payload_bytes, uint64_t inflight_bound);

  /// Load or store `id` of `blocks` blocks (at least one) waits for room, after those waiting.
  void enqueue(uint64_t id, transfer_kind kind, size_t blocks);
  /// Lets go, in order, what fits, holding its bytes; the rest waits. `now_ns` times the waits.
  std::vector<storage_grant> pump(int64_t now_ns);

  /// Transfer `id`'s first bytes went: its storage answer and network flow both run.
  void begin_parts(uint64_t id);
  /// Storage answered a put of `blocks` blocks of store `id` (`f`: how it went): their bytes are
  /// free. Returns whether that was the store's last put, which ends its storage part.
  bool put_answered(uint64_t id, size_t blocks, storage_failure f);
  /// Transfer `id` failed so (the first failure is the one told).
  void fail(uint64_t id, storage_failure f);
  /// Part `p` of transfer `id` ended. Once both have: how the transfer went.
  std::optional<storage_failure> end_part(uint64_t id, storage_part p);
  /// The engine delivered transfer `id` (any transfer: those of no storage are not known here):
  /// a load's buffers are free. Returns whether that made room.
  bool forget(uint64_t id);

  uint64_t inflight_bytes() const { return inflight_; }
  size_t waiting() const { return queue_.size(); }
  const storage_traffic_counts& counts() const { return counts_; }

 private:
  struct entry {
    transfer_kind kind = transfer_kind::load;
    size_t blocks = 0;
    size_t released = 0;        // blocks let go so far
    uint32_t puts_out = 0;      // a store's puts not answered
    int64_t waiting_since = -1;  // heads the queue without room since then
    uint64_t load_bytes = 0;    // a load's buffers, held until it is delivered
    bool begun = false;
    bool answer_ended = false;
    bool flow_ended = false;
    storage_failure failure;
  };

  entry& at(uint64_t id);
  size_t room_for(size_t blocks) const;
  void hold(uint64_t bytes);

  uint64_t each_;
  uint64_t bound_;
  uint64_t inflight_ = 0;
  std::deque<uint64_t> queue_;
  absl::flat_hash_map<uint64_t, entry> entries_;
  storage_traffic_counts counts_;
};

}  // namespace kvtier
