#pragma once

// The decode side of a PD handoff (docs/cluster.md): a decode instance preallocates a request's
// blocks before its prefill instance computes it (FastDeploy's preallocate_resource_in_d,
// model/pd/preallocation.hpp), waits for its KV (over the PD link, or read from storage into the
// preallocated blocks), then decodes it. A victim of preemption here is dropped: it goes back to
// the router with what its next pass needs (docs/fastdeploy.md §4, docs/preemption.md).

#include <cstdint>
#include <optional>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "model/scheduler/scheduler_state.hpp"

namespace kvtier {

class decode_side {
 public:
  /// A preallocation is asked for: the answer at once (refused), or none and the controller is
  /// asked to hold `ask`.
  std::optional<preallocate_reply> on_preallocate(const preallocate_request& p,
                                                  scheduler_state& st, preallocation& ask);
  /// The controller's answer to `ask` for the arrival `a`.
  preallocate_reply on_preallocated(const preallocation_result& res, const request_arrival& a,
                                    scheduler_state& st);
  /// P is done with a request; false if it was not preallocated here. The request is awaited
  /// by the front end from now on.
  bool on_kv_handoff(const kv_handoff& k, scheduler_state& st, scheduler_orders& out);
  /// Storage handoff: the read into host memory ended (`ok`), or the swap-in did.
  void loaded(request_id id, bool ok, scheduler_state& st, scheduler_orders& out);
  void swapped_in(request_id id, scheduler_state& st, scheduler_orders& out);

  /// Requests whose KV is in place join the running ones (at the start of a plan).
  void start_ready(request_book& book);

  /// Whether this instance drops its victims, which is then the commit's to say.
  static bool drops_victims(const scheduler_core_options& o);
  /// The grant of a commit that preempted `victims` (and dropped them): each leaves.
  void drop_victims(const std::vector<request_id>& victims, const grant& g, scheduler_state& st,
                    scheduler_orders& out);
  /// A dropped victim's save is being written; is `id` one?
  bool dropping(request_id id) const { return dropping_.contains(id); }
  /// Ask storage again whether `id`'s save is visible.
  void check_drop_written(request_id id, scheduler_orders& out) const;
  /// Its leading `leading` saved blocks are visible.
  void drop_visible(request_id id, uint32_t leading, scheduler_state& st, scheduler_orders& out);

  /// Requests that hold a slot without running: being preallocated, preallocated, or ready to
  /// join.
  uint64_t holding() const {
    return asking_.size() + awaiting_kv_.size() + decode_ready_.size();
  }
  /// Nothing is being preallocated, waits for KV, to run, or for a save.
  bool idle() const {
    return asking_.empty() && awaiting_kv_.empty() && decode_ready_.empty() && dropping_.empty();
  }

 private:
  struct kv_wait {
    uint32_t hit_blocks = 0;
    uint64_t hit_tokens = 0;
    std::vector<uint64_t> read_keys;  // storage: the blocks it lacks
    transfer swap_in;                 // storage: what follows their read
  };
  struct drop_write {
    std::vector<uint64_t> keys;  // what its save writes, in block order
    uint32_t polls = 0;
    request_done done;           // the answer, once they are all visible
  };
  void read_handoff(request_id id, scheduler_state& st, scheduler_orders& out);
  void kv_arrived(request_id id, scheduler_state& st, scheduler_orders& out);
  void handoff_failed(request_id id, scheduler_state& st, scheduler_orders& out);
  void start_decoding(request_id id, uint64_t computed, scheduler_state& st,
                      scheduler_orders& out);
  void finish_drop(request_id id, bool timed_out, scheduler_state& st, scheduler_orders& out);

  // Granted here, the controller not yet answered: each holds its slot and the blocks asked for,
  // so that a preallocation handled before that answer sees them taken (docs/cluster.md, PD 1).
  absl::flat_hash_map<request_id, uint64_t> asking_;
  uint64_t asked_blocks_ = 0;
  absl::flat_hash_map<request_id, kv_wait> awaiting_kv_;  // preallocated
  std::vector<request_id> decode_ready_;  // KV in place: joins running at the next plan
  absl::flat_hash_map<request_id, drop_write> dropping_;  // victims whose save is writing
};

}  // namespace kvtier
