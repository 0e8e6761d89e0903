#pragma once

// What the parts of the scheduler core share (scheduler_core.hpp): the instance's requests, what
// the next commit reports, the step machine, the report, and the acts every part performs:
// answering a request, letting a finished one's blocks go (cache.output_caching writes them to
// storage first), writing blocks to storage, asking for a plan. The PD sides
// (prefill_side.hpp, decode_side.hpp) keep their own state and act through this one.

#include <cstdint>
#include <functional>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "model/messages.hpp"
#include "model/pd/pd_options.hpp"
#include "model/scheduler/batch_planner.hpp"
#include "model/scheduler/cost_model.hpp"
#include "model/scheduler/request_book.hpp"
#include "model/scheduler/scheduler_orders.hpp"
#include "model/scheduler/step_phase.hpp"

namespace kvtier {

struct scheduler_core_options {
  scheduler_options options;
  compute_profile compute;
  uint32_t device_blocks = 0;  ///< a request needing more blocks than this is rejected
  /// PD (docs/cluster.md): a prefill instance hands every request off after its first token; a
  /// decode instance preallocates requests and decodes them once their KV is in place. Handed
  /// off KV moves through this instance's transfer engine (pd.transfer = storage).
  pd_role role = pd_role::mixed;
  pd_options pd;
  /// cache.output_caching (FastDeploy --enable-output-caching): a decode or mixed instance
  /// writes a finished request's prompt and output blocks to storage before freeing them.
  bool output_caching = false;
  uint64_t block_bytes = 0;
  bool log_steps = false;  ///< keep every step's timeline (scheduler_report::step_log)
};

/// Where a step's compute runs: modelled (a timer at the end the cost model gives) or on the GPU
/// (busy kernels per layer, each waiting for its layer of the step's swap-in).
enum class step_compute : uint8_t { modelled, gpu };

/// Virtual nanoseconds now (the actor's clock; a test's variable).
using now_source = std::function<int64_t()>;

/// Storage puts are two-phase: a block is invisible until the put writing it completes. A wait
/// for blocks to become visible asks storage again after at most this long.
constexpr int64_t visibility_poll_ns = 1'000'000;

struct scheduler_state {
  scheduler_state(const scheduler_core_options& o, now_source clock);

  scheduler_core_options options;
  now_source now;
  request_book book;
  output_reserve reserve;
  step_machine steps;
  scheduler_report report;
  uint32_t known_available = 0;  ///< device blocks available, as the controller last said
  uint64_t awaiting_ready = 0;   ///< arrivals and refetches the controller has not answered
  // what the next commit reports
  std::vector<token_mark> computed;
  std::vector<request_id> finished;
  absl::flat_hash_set<request_id> unanswered;  ///< requests here the front end awaits
  // cache.output_caching: storage keys of each request's prompt and output blocks, and how many
  // finished requests' blocks are being written (held until then)
  absl::flat_hash_map<request_id, std::vector<uint64_t>> output_keys;
  uint64_t writing_outputs = 0;
  uint64_t next_transfer = uint64_t{1} << 62;  ///< apart from the controller's transfer ids

  /// Its answer as of now: when it finished, and how its PD decode went.
  request_done done_now(request_id id) const;
  void answer(request_id id, request_done d, scheduler_orders& out);
  /// Plans once everything else that happens at this instant has been handled (a timer at the
  /// current time fires only after every pending message), so requests that become ready
  /// together are planned together, as an engine loop sees its whole waiting queue.
  void request_plan(scheduler_orders& out);
  /// A transfer of this instance's own (not the controller's) over `keys`' blocks.
  transfer new_transfer(transfer_kind kind, const std::vector<uint64_t>& keys);
  /// Device -> host -> storage: the store waits for the D2H; `use` names who hears the store.
  void write_to_storage(const std::vector<uint64_t>& keys, transfer_use use, request_id req,
                        scheduler_orders& out);

  // -- cache.output_caching (output_cache.cpp) ----------------------------------------------------

  /// Remembers where `x`'s blocks would be stored when it finishes (if output caching is on).
  void expect_output(const live_request& x, const request_arrival& a);
  /// `id` finished: answered now; its blocks go at the next commit, or once written.
  void finish(request_id id, scheduler_orders& out);
  /// The write `finish` started is done: the blocks may go.
  void output_written(request_id id, scheduler_orders& out);
};

}  // namespace kvtier
