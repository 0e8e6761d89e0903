#pragma once

// The front end's PD handoffs without the actor (FastDeploy's splitwise flow, docs/fastdeploy.md
// §6; docs/cluster.md): a request routed to a prefill instance P first has a decode instance D
// preallocate its blocks, then P prefills it and hands its KV off to D, which decodes it. The
// actor (actors/front_end/) sends the messages this class asks for and hands it the answers.
//
// Each request in the flow is at one stage (pd_handoffs::on_* checks each move; any other one
// stops the run):
//
//   begin ---------> allocating   D was asked to preallocate it
//   allocating ----> waiting      D refused: the handoff timer asks again or gives up
//   waiting -------> allocating   asked again (pd.retry_decode_resource, or a rerouted request)
//   allocating ----> prefilling   D granted: P has it
//   prefilling ----> decoding     P is done (handed off, failed or cancelled): D answers it
//   allocating, waiting --> ended (never prefilled: it never fits on D, or D had no room in time)
//   decoding ------> ended        D finished, rejected or failed it
//   decoding ------> rerouted     D preempted and dropped it (docs/fastdeploy.md §4): it goes
//                                 through the router again, and begins anew as the same request
//
// The front end's report counts what happens on the way (front_end_report's PD fields).

#include <cstdint>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "model/messages.hpp"
#include "model/pd/pd_options.hpp"

namespace kvtier {

enum class handoff_stage : uint8_t {
  allocating,  ///< a decode instance was asked to preallocate it; its answer is due
  waiting,     ///< refused: the handoff timer is set
  prefilling,  ///< preallocated on its decode instance: the prefill instance has it
  decoding,    ///< the prefill instance is done with it: the decode instance's answer is due
};

const char* to_string(handoff_stage s);

/// Whether a request may go from `from` to `to` (the table above; ending or leaving for the
/// router is checked where it happens).
bool handoff_transition_allowed(handoff_stage from, handoff_stage to);

/// A request left the PD flow for good: its session's next turn may start its think time.
struct handoff_end {
  uint64_t session = 0;
  uint32_t turn = 0;
  int64_t at_ns = 0;
};

/// The prefill instance the router chose answered for a request (router::answered).
struct prefill_answer {
  size_t prefill = 0;  ///< the router's index
  uint32_t prompt_tokens = 0;
};

/// What follows a decode instance's answer to a preallocation.
struct allocation_step {
  enum class next : uint8_t {
    prefill,          ///< granted: push `arrival` to instance `instance`
    wait,             ///< refused: set the handoff timer for `wake_ns`
    never_prefilled,  ///< it can never fit on D: `answer` the router, then `end`
  };
  next what = next::wait;
  request_arrival arrival;
  size_t instance = 0;  ///< the deployment's index of the prefill instance
  int64_t wake_ns = -1;
  prefill_answer answer;
  handoff_end end;
};

/// What follows the handoff timer.
struct wait_step {
  bool ask_again = false;  ///< ask decoder `decoder` again; else it timed out: `answer`, `end`
  size_t decoder = 0;
  prefill_answer answer;
  handoff_end end;
};

/// What follows the prefill instance's answer: `answer` the router, send `handoff` to `decoder`.
struct prefill_step {
  prefill_answer answer;
  size_t decoder = 0;
  kv_handoff handoff;
};

/// What follows the decode instance's answer: the request goes round again (`arrival`, to the
/// router) or it ended (`end`).
struct decode_step {
  bool rerouted = false;
  request_arrival arrival;
  handoff_end end;
};

class pd_handoffs {
 public:
  /// `entry`: the deployment's indices of the prefill instances, in the router's order;
  /// `decoders`: those of the decode instances (at least one).
  pd_handoffs(const pd_options& options, std::vector<size_t> entry, std::vector<size_t> decoders);

  /// The deployment's index of decode instance `d`.
  size_t decoder_instance(size_t d) const { return decoders_.at(d); }

  /// Request `a` was routed to prefill instance `prefill` (the router's index): it waits for a
  /// decode instance's preallocation. Returns the decoder to ask, the one with the fewest
  /// requests in flight.
  size_t begin(size_t prefill, request_arrival a);
  /// What decoder of `id` is asked to preallocate.
  preallocate_request preallocation(request_id id) const;

  /// Decoder `d` answered the preallocation of `id` at `now_ns`.
  allocation_step on_preallocated(request_id id, size_t d, const preallocate_reply& r,
                                  int64_t now_ns, front_end_report& report);
  /// The handoff timer of `id` fired at `now_ns`.
  wait_step on_wait(request_id id, int64_t now_ns, front_end_report& report);
  /// The prefill instance answered `id`.
  prefill_step on_prefilled(request_id id, const request_done& done, front_end_report& report);
  /// The decode instance answered `id`.
  decode_step on_decoded(request_id id, const request_done& done, front_end_report& report);

  /// Requests in the flow, and where one is.
  size_t size() const { return handoffs_.size(); }
  bool contains(request_id id) const { return handoffs_.contains(id); }
  handoff_stage stage_of(request_id id) const { return handoffs_.at(id).stage; }
  /// Requests preallocated on (or being asked of) decoder `d` and not yet answered by it.
  uint64_t in_flight(size_t d) const { return decoding_.at(d); }

 private:
  struct handoff {
    handoff_stage stage = handoff_stage::allocating;
    size_t prefill = 0;       // router index
    size_t decoder = 0;       // asked, then holding it
    request_arrival arrival;  // until it is pushed to the prefill instance
    trace_request key;        // what the answers need (no block ids)
    int64_t deadline = -1;    // P gives up waiting for D's allocation then
    int64_t prefill_end = -1;
    uint32_t reroutes = 0;    // times a decode instance dropped it
  };

  handoff& at(request_id id, handoff_stage expected);
  void move(handoff& h, handoff_stage next) const;
  size_t ask(handoff& h);
  bool retries(const handoff& h) const;
  // It never reached a prefill instance: counted and recorded here, since no instance did.
  std::pair<prefill_answer, handoff_end> never_prefilled(request_id id, bool rejected,
                                                         int64_t now_ns,
                                                         front_end_report& report);
  void count_handoff(const handoff& h, const request_done& done, front_end_report& report) const;

  pd_options options_;
  std::vector<size_t> entry_;
  std::vector<size_t> decoders_;
  std::vector<uint64_t> decoding_;  // per decoder
  absl::flat_hash_map<request_id, handoff> handoffs_;
};

}  // namespace kvtier
