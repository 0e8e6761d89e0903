#pragma once

// The prefill side of a PD handoff (docs/cluster.md): a prefill instance prefills each request
// with one output token and hands its KV to the decode instance, over the PD link (layer by
// layer while the prompt computes, model/pd/prefill_streams.hpp) or through storage (every block
// written once the prompt is computed, then the first token). The request is answered, and its
// blocks go, once the KV has been sent.

#include <cstdint>
#include <memory>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "model/pd/prefill_streams.hpp"
#include "model/scheduler/scheduler_state.hpp"

namespace kvtier {

class prefill_side {
 public:
  explicit prefill_side(const scheduler_core_options& o);

  /// `x` arrived to be handed off (`a.handoff`): what its handoff will send.
  void expect(const live_request& x, const request_arrival& a, const scheduler_state& st);
  /// Its first token was sampled at `now`: the KV goes to D.
  void begin(request_id id, int64_t now, scheduler_state& st, scheduler_orders& out);
  /// Storage handoff: the blocks were written (`ok`) or not.
  void stored(request_id id, bool ok, scheduler_state& st, scheduler_orders& out);
  /// Storage handoff: the leading `leading` written blocks are visible.
  void visible(request_id id, uint32_t leading, scheduler_state& st, scheduler_orders& out);
  /// Storage already holds the `leading` first of the hits asked about at begin.
  void already_stored(request_id id, uint32_t leading, scheduler_state& st,
                      scheduler_orders& out);
  /// The handoff timer: the last layer has arrived (direct), or ask storage again.
  void on_timer(request_id id, scheduler_state& st, scheduler_orders& out);

  /// Where a step's per-layer end times go while blocks stream over the PD link (null: nowhere).
  std::vector<int64_t>* layer_end_sink();
  /// A step computed `items`, its layers ending as `layer_end_sink` received: what D lacks goes.
  void step_computed(const std::vector<work_item>& items);

  /// No handoff is under way.
  bool idle() const { return handing_off_.empty(); }
  /// Adds the PD link's figures (direct).
  void fill(scheduler_report& r) const;

 private:
  // Storage: what a handoff writes and waits for.
  struct store_plan {
    std::vector<uint64_t> keys;  // every block of the prompt, in order
    uint32_t shared = 0;         // leading blocks the write policy stores (unshared_blocks)
    uint32_t computed_from = 0;  // of those, the ones this pass computed start here
    uint32_t polls = 0;          // visibility checks so far
  };
  void check_visible(request_id id, scheduler_orders& out) const;
  /// Writes what the write policy does not store (device -> host -> storage), skipping the
  /// `stored_hits` leading blocks storage already holds.
  void write(request_id id, uint32_t stored_hits, scheduler_state& st, scheduler_orders& out);
  void complete(request_id id, bool ok, scheduler_state& st, scheduler_orders& out);

  const pd_options pd_;
  std::unique_ptr<prefill_streams> streams_;  // direct: what goes over the PD link
  absl::flat_hash_map<request_id, store_plan> stores_;  // storage
  absl::flat_hash_map<request_id, int64_t> handing_off_;  // the prefill end of each handoff
  std::vector<int64_t> layer_ends_;  // scratch
};

}  // namespace kvtier
