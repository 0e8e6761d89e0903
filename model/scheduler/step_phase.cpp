#include "model/scheduler/step_phase.hpp"

#include <cstdio>
#include <cstdlib>

namespace kvtier {

const char* to_string(step_phase p) {
  switch (p) {
    case step_phase::idle: return "idle";
    case step_phase::plan_set: return "plan_set";
    case step_phase::planning: return "planning";
    case step_phase::probing: return "probing";
    case step_phase::committing: return "committing";
    case step_phase::committing_bookkeeping: return "committing_bookkeeping";
    case step_phase::computing: return "computing";
  }
  return "?";
}

bool step_transition_allowed(step_phase from, step_phase to) {
  using p = step_phase;
  bool commits = to == p::committing || to == p::committing_bookkeeping;
  switch (from) {
    case p::idle: return to == p::plan_set || to == p::planning;
    case p::plan_set: return to == p::idle;
    case p::planning: return to == p::probing || commits || to == p::idle;
    case p::probing: return commits || to == p::idle;
    case p::committing:
    case p::committing_bookkeeping: return to == p::computing || to == p::idle;
    case p::computing: return to == p::idle;
  }
  return false;
}

// As KVTIER_ASSERT (core/check.hpp), with the phases named: a broken loop must stop the run where
// it broke, not send a second commit or lose a plan.
void step_machine::move_to(step_phase next) {
  if (!step_transition_allowed(phase_, next))
    refuse(next);
  phase_ = next;
}

void step_machine::refuse(step_phase next) const {
  std::fprintf(stderr, "kvtier: internal error: scheduler step phase %s -> %s is not allowed\n",
               to_string(phase_), to_string(next));
  std::abort();
}

bool step_machine::granted_nothing(bool preempted, bool refused) {
  if (phase_ != step_phase::committing && phase_ != step_phase::committing_bookkeeping)
    refuse(step_phase::idle);  // a grant answers a commit
  bool freed = preempted || phase_ == step_phase::committing_bookkeeping;
  move_to(step_phase::idle);
  bool again = freed || (refused && replan_ == refusal_replan::none);
  replan_ = again && !freed ? refusal_replan::replanned : refusal_replan::none;
  return again;
}

void step_machine::granted_work() {
  move_to(step_phase::computing);
  replan_ = refusal_replan::none;
}

}  // namespace kvtier
