#pragma once

// Where the scheduler's step loop stands (scheduler_core.hpp). One step at a time is planned,
// committed to the controller and computed (docs/design.md, "The timed replay", stages 2 to 5);
// events in between (arrivals, landed prefetches, handoffs) only ask for a plan, which happens
// once every event of the instant has been handled: a plan tick is a timer at the current time,
// and one is set at most.
//
// Allowed transitions (step_machine::move_to checks each; any other one stops the run):
//
//   idle -------> plan_set      an event asks for a plan at this instant
//   plan_set ---> idle          the tick fires (planning starts from idle)
//   idle -------> planning      there is something to plan
//   planning ---> probing       the planner must ask the controller first
//   planning, probing --> committing, committing_bookkeeping    the step's commit is sent
//   planning, probing --> idle  nothing fits: wait for the next event
//   committing, committing_bookkeeping --> computing   the grant brings work
//   committing, committing_bookkeeping --> idle        it brings none
//   computing --> idle          the step ended
//
// No plan tick is ever set while a step is planned, committed or computed: the step's own end
// plans the next one.

#include <cstdint>

namespace kvtier {

enum class step_phase : uint8_t {
  idle,                    ///< no step in flight, no plan tick set
  plan_set,                ///< a plan tick is set for this instant
  planning,                ///< a step is being planned (within one event)
  probing,                 ///< ... and waits for the controller's probe reply
  committing,              ///< its commit is in flight, carrying the plan's work only
  committing_bookkeeping,  ///< ... carrying finished requests or computed blocks too
  computing,               ///< granted: it computes until its timer or the GPU's answer
};

const char* to_string(step_phase p);

/// Whether the step loop may go from `from` to `to` (the table above).
bool step_transition_allowed(step_phase from, step_phase to);

/// A refused admission (its blocks went elsewhere between probe and commit) is planned again
/// once at that instant, then at the next event, never in a loop (docs/design.md, "A step").
/// `replanned` lasts from such a replan until the next grant, which may come after idle time
/// when the replan found nothing to commit; it outlives the phases, so it is kept beside them.
enum class refusal_replan : uint8_t { none, replanned };

class step_machine {
 public:
  step_phase phase() const { return phase_; }
  /// A step is being planned, committed or computed.
  bool busy() const { return phase_ != step_phase::idle && phase_ != step_phase::plan_set; }
  /// Goes to `next`; a transition the table does not allow stops the run with both names.
  void move_to(step_phase next);

  /// The grant of the commit in flight brought no work: back to idle. Returns whether to plan
  /// again at once: blocks were freed (a preemption, or the commit's bookkeeping), or an
  /// admission was refused that is not itself the replan of a refusal.
  bool granted_nothing(bool preempted, bool refused);
  /// The grant brought work: the step computes.
  void granted_work();

 private:
  [[noreturn]] void refuse(step_phase next) const;

  step_phase phase_ = step_phase::idle;
  refusal_replan replan_ = refusal_replan::none;
};

}  // namespace kvtier
