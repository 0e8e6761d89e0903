#pragma once

// The front end: the one actor that owns the workload. It reads requests from a feed in recorded
// order, holds session turns back until the turn they follow has finished plus its think time
// (workload.hpp), and pushes each request to an instance's scheduler when it arrives. Instances
// never see where requests come from: a trace replay, requests built in code and a live server
// are all front ends.

#include <cstdint>
#include <memory>
#include <vector>

#include "model/front_end/request_feed.hpp"
#include "model/front_end/router.hpp"
#include "model/pd/pd_options.hpp"
#include "actors/messages.hpp"
#include "core/sim_clock.hpp"

namespace kvtier {

struct front_end_config {
  double time_scale = 1;  ///< stretches recorded arrivals and think times
  router_options router;
  sim_clock clock;
  /// PD (pd_dispatch, docs/cluster.md): requests enter prefill instances, each after a decode
  /// instance has preallocated it, and are decoded there once the prefill handed them off.
  bool disaggregated = false;
  pd_options pd;
};

/// An instance as the front end sees it: where requests go, and whose index a probe reads.
struct front_end_target {
  scheduler_actor scheduler;
  cache_controller_actor controller;
  pd_role role = pd_role::mixed;
};

/// The router (router.hpp) chooses which of `instances` each request enters (its mixed or
/// prefill instances); a disaggregated front end gives decode instances the fewest in flight.
front_end_actor spawn_front_end(caf::actor_system& sys, const front_end_config& config,
                                std::shared_ptr<request_feed> feed,
                                std::vector<front_end_target> instances);

/// The bad input named by a front end's error reply to `run`, if that is what it was.
std::optional<input_problem> input_problem_of(const caf::error& e);

}  // namespace kvtier
