#pragma once

// The scheduler's requests: each one's progress, and the waiting and running queues.
//
// Progress of a request with P prompt tokens that has generated g tokens: `computed` tokens have
// KV. It catches up to P + g tokens (prefill: chunk by chunk, within the step's token budget);
// the step that catches it up samples the next token (g + 1). A decode step is a catch-up of one
// token. A preempted request loses its KV (computed = 0) and catches up again over prompt and
// generated tokens, reusing whatever the cache tiers kept (recompute, as FastDeploy and vLLM do).

#include <cstdint>
#include <deque>
#include <vector>

#include <absl/container/node_hash_map.h>

#include "model/messages.hpp"
#include "model/request_layout.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

struct live_request {
  trace_request trace;  ///< as read (its block ids dropped once sent to the controller)
  request_layout layout;
  uint32_t prompt = 0;
  uint32_t output = 1;        ///< tokens to generate (at least one)
  uint32_t generated = 0;
  uint64_t computed = 0;
  uint64_t high_water = 0;    ///< most tokens ever computed: below it, computing is recomputing
  uint32_t covered_blocks = 0;  ///< blocks the controller holds for it
  uint64_t uncached_hint = 0;   ///< tokens it would compute, as its last probe found (0: never)
  uint32_t blocks_hint = 0;     ///< device blocks its admission would take, as last probed
  bool running = false;
  bool finished = false;
  int64_t decode_ready_ns = -1;  ///< PD decode: its KV was in place (or recompute began)
  bool recomputed = false;       ///< PD decode: its handoff failed and it computes the prompt
  /// PD decode: the listed blocks it was preallocated with, which it goes back to the router
  /// with if it is dropped (kept until it is answered).
  std::vector<cache_block> decode_blocks;
  /// save_to_storage: preempted with `saved_blocks` computed blocks saved; until re-admitted, a
  /// probe that finds fewer of them in the tiers has the controller look them up in storage
  /// (once per preemption), and the request waits for that at the head of the queue.
  uint32_t saved_blocks = 0;
  bool refetch_due = false;
  bool refetching = false;
  /// Its storage lookup was made again before this admission (the tiers lost blocks it had
  /// cached when it became ready); cleared when it is admitted.
  bool looked_up_again = false;
  request_record record;

  /// Tokens it must have KV for before it samples its next token.
  uint64_t target() const { return uint64_t{prompt} + generated; }
  /// One token left to catch up, with a token already sampled: a decode step.
  bool decoding() const { return generated > 0 && computed + 1 == target(); }
};

class request_book {
 public:
  /// Adds a request. Ids are the trace's sequence numbers: dense over a whole cluster, sparse on
  /// each of its instances, hence a map (references stay valid as requests are added). A request
  /// comes again only after it finished here (PD: a decode instance dropped it and the front end
  /// routed it again); its earlier pass's record is kept in `retired()`.
  live_request& add(const trace_request& r, std::vector<cache_block> blocks, uint32_t block_size,
                    uint32_t attempt = 0);
  live_request& at(request_id id) { return requests_.at(id); }
  const live_request& at(request_id id) const { return requests_.at(id); }
  bool contains(request_id id) const { return requests_.count(id) > 0; }

  std::deque<request_id> waiting;   ///< first come first; preempted requests go back to the front
  std::vector<request_id> running;  ///< in admission order: the last one is the next victim

  /// Every request ever added, in no particular order.
  const absl::node_hash_map<request_id, live_request>& all() const { return requests_; }
  /// Records of earlier passes of requests that came again.
  const std::vector<request_record>& retired() const { return retired_; }

 private:
  // Looked up for every request of every step: a node map (references stay valid) with no
  // division per lookup, unlike std::unordered_map.
  absl::node_hash_map<request_id, live_request> requests_;
  std::vector<request_record> retired_;
};

}  // namespace kvtier
