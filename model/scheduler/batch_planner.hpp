#pragma once

// One step of continuous batching, in FastDeploy v1's order (docs/fastdeploy.md §3):
//  1. running requests first, in admission order: a prefill chunk (catching up as far as the token
//     budget allows) or one decode token; each needs blocks for the tokens it will have;
//  2. if those blocks are not there, preempt from the back of the running list (the request
//     admitted last) until they are: the victim releases everything and waits again at the
//     front of the queue; what its blocks become meanwhile is scheduler.preemption
//     (model/scheduler/preemption.hpp);
//  3. only if nobody was preempted: admit waiting requests first come first served while seats
//     (max_num_seqs), token budget and blocks last. A candidate's cached prefix (device and host
//     hits, storage prefetches included) is skipped, except that a full hit recomputes its last
//     block (the step needs logits). A candidate is admitted only if the blocks it needs plus
//     `reserve` blocks for each running request are available; the first one that does not fit
//     stops admission (head-of-line, as FastDeploy).
// The reserve starts at 16 blocks per running request, decays by 0.025 per non-empty step and
// returns to 16 after a preemption, so a burst of new prefills cannot starve running decodes.
//
// Planning uses what the controller reported (available blocks, per-candidate matches, what each
// victim would free); the controller applies the plan and reports what really happened.

#include <cstdint>
#include <vector>

#include "model/scheduler/preemption.hpp"
#include "model/messages.hpp"
#include "model/scheduler/request_book.hpp"

namespace kvtier {

struct scheduler_options {
  uint32_t block_size = 64;
  uint32_t max_num_seqs = 128;
  uint32_t token_budget = 8192;
  uint32_t probe_limit = 32;          ///< waiting requests matched per step, at most
  double reserve_output_blocks = 16;  ///< FD_RESERVE_OUTPUT_BLOCK_NUM_FOR_DECODE_...
  double reserve_decay = 0.025;
  uint32_t reserve_min = 0;
  /// What a victim's KV becomes (preemption.hpp): the controller saves it; the scheduler names
  /// its generated blocks by the same rule and, under save_to_storage, asks for a storage
  /// lookup before re-admission.
  preemption_mode preemption = preemption_mode::recompute;
};

/// FastDeploy's decaying reserve of blocks per running request, kept free at admission.
class output_reserve {
 public:
  explicit output_reserve(const scheduler_options& o) : options_(o), value_(o.reserve_output_blocks) {}
  uint32_t blocks() const;
  void after_step() { value_ -= options_.reserve_decay; }
  void after_preemption() { value_ = options_.reserve_output_blocks; }

 private:
  scheduler_options options_;
  double value_;
};

/// One request's work in a step: `tokens` tokens from `start`.
struct work_item {
  request_id req = 0;
  uint64_t start = 0;
  uint32_t tokens = 0;
  uint32_t need_blocks = 0;  ///< blocks to add before it runs
  bool admitted = false;     ///< joins the running list with this step
  /// The book's entry of `req`, found once when the step is planned: a step looks each running
  /// request up four times otherwise (the book is a node map, so the entry stays put while the
  /// step lasts).
  live_request* request = nullptr;
};

struct step_plan {
  std::vector<work_item> items;
  uint32_t need_blocks = 0;  ///< of the running requests
  uint32_t budget_left = 0;
  std::vector<token_mark> grows;
  std::vector<token_mark> admits;
  std::vector<request_id> preempted;
};

/// Part 1: what each running request does this step, and the blocks it needs. Into `plan`,
/// whose lists are emptied first and keep their capacity: a decode instance plans a step every
/// few milliseconds of virtual time, and a fresh plan's allocations were a visible share of a
/// replay's time (BENCHMARKS.md, "Calls read from their bytes").
void plan_running(request_book& book, const scheduler_options& o, step_plan& plan);
inline step_plan plan_running(request_book& book, const scheduler_options& o) {
  step_plan plan;
  plan_running(book, o, plan);
  return plan;
}

/// Whether the controller must be asked before planning the rest, and what (candidates to match,
/// victims in preemption order). `known_available` is a lower bound from the last grant.
bool needs_probe(const request_book& book, const scheduler_options& o, const step_plan& plan,
                 uint32_t known_available, uint32_t reserve_blocks, probe& out);

/// Parts 2 and 3. `reply` is null when no probe was made.
void plan_rest(request_book& book, const scheduler_options& o, const output_reserve& reserve,
               uint32_t available, const probe_reply* reply, step_plan& plan);

/// Remembers what the probe found, so the next probes can stop at the step's token budget.
void note_matches(request_book& book, const probe_reply& reply, uint32_t budget);

/// Applies the controller's answer: admits, preemptions, failed grows. The work that runs goes
/// into `items` (emptied first).
void apply_grant(request_book& book, const scheduler_options& o, const step_plan& plan,
                 const grant& g, int64_t now, std::vector<work_item>& items);

struct step_outcome {
  std::vector<token_mark> computed;   ///< for the next commit: requests that completed a listed block
  std::vector<request_id> finished;
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t recomputed_tokens = 0;
};

/// The step ended at `now`: progress, sampled tokens, finished requests.
step_outcome finish_step(request_book& book, const std::vector<work_item>& items, int64_t now);

}  // namespace kvtier
