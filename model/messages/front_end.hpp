#pragma once

// The front end's messages: to a scheduler (arrivals), to a decode instance (PD), to a cache
// controller (routing) (docs/design.md, "Layout"). Plain structs of ids and integers, with no CAF:
// the CAF-free cores (model/) take and return them, and actors/messages.hpp gives them their
// inspect() overloads, type IDs and the actors' typed interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/ids.hpp"
#include "model/pd/preallocation.hpp"

namespace kvtier {

// -- front end -> scheduler -------------------------------------------------------------------------

/// A request arrives at its instance now, with its prompt's cache blocks. The scheduler answers
/// when the request has finished (or was rejected: it can never fit the device), which is when
/// the session turns that follow it start their think time.
/// PD: a request prefilled here is handed off to a decode instance (docs/cluster.md).
struct handoff_order {
  bool active = false;
  uint32_t decode_has_blocks = 0;  ///< leading blocks D already holds: never sent (direct)
  /// Times a decode instance dropped this request at preemption and the front end routed it
  /// again (docs/fastdeploy.md §4): its prompt is then the original prompt plus the tokens
  /// generated so far.
  uint32_t reroutes = 0;
};

struct request_arrival {
  trace_request req;
  std::vector<cache_block> blocks;
  handoff_order handoff;
};

struct request_done {
  request_id req = 0;
  int64_t at_ns = 0;
  bool rejected = false;
  bool failed = false;           ///< PD: the handoff failed and the request ends in error
  // PD, from a prefill instance: the handoff as it went
  int64_t prefill_end_ns = -1;   ///< the step that computed the prompt's last token ended
  int64_t first_token_ns = -1;   ///< the first token was emitted
  bool handoff_ok = true;        ///< the KV reached D (direct) or storage (storage) whole
  // PD, from a decode instance
  int64_t decode_ready_ns = -1;  ///< its KV was in place (or recomputed): decoding could start
  bool recomputed = false;       ///< the handoff failed and D computed the prompt itself
  /// Preempted on a decode instance and dropped there (docs/fastdeploy.md §4): the front end
  /// routes it again as a request of `resume_prompt` tokens (prompt and generated) over
  /// `resume_blocks` (its listed blocks, with the generated blocks a save named), to generate
  /// `resume_output` more.
  bool dropped = false;
  int64_t dropped_ns = -1;          ///< when it was preempted (at_ns: after the optional write)
  bool drop_saved = false;          ///< its blocks were written to storage first
  uint32_t resume_prompt = 0;
  uint32_t resume_output = 0;
  std::vector<cache_block> resume_blocks;
};

// -- front end -> decode instance (PD) ------------------------------------------------------------

/// Before P prefills a request, its decode instance preallocates the request's blocks
/// (FastDeploy's preallocate_resource_in_d, docs/fastdeploy.md §5).
struct preallocate_request {
  request_arrival arrival;
};

struct preallocate_reply {
  request_id req = 0;
  preallocation_verdict verdict = preallocation_verdict::granted;
  uint32_t device_hit_blocks = 0;  ///< leading prompt blocks D already held
};

enum class handoff_outcome : uint8_t {
  delivered = 0,  ///< P's KV is at D (direct) or in storage (storage)
  failed = 1,     ///< P's send failed
  cancelled = 2,  ///< P never prefilled it (rejected there): D gives the blocks back
};

constexpr const char* to_string(handoff_outcome o) {
  switch (o) {
    case handoff_outcome::delivered: return "delivered";
    case handoff_outcome::failed: return "failed";
    case handoff_outcome::cancelled: return "cancelled";
  }
  return "?";
}

/// P is done with a request: D may decode it. Answered when D finishes it.
struct kv_handoff {
  request_id req = 0;
  handoff_outcome outcome = handoff_outcome::delivered;
  int64_t first_token_ns = -1;
  bool inject_failure = false;  ///< pd.failure_rate drew this handoff: it fails
};

// -- front end -> cache controller (routing) ------------------------------------------------------

/// How much of this prompt the instance holds now, device then host, without taking anything.
struct prefix_lookup {
  std::vector<cache_block> blocks;
};

struct prefix_hit {
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  uint64_t device_tokens = 0;
  uint64_t host_tokens = 0;
};

}  // namespace kvtier
