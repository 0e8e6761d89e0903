#pragma once

// What the PD scenario tests share: an instance of a deployment built from the deployment's own
// settings, an instance found by its role, and the checks every drained PD run must pass.

#include <stdexcept>
#include <string>

#include "tests/sim/scenario.hpp"

namespace kvtier::test {

/// An instance in `role` with the settings of `t`'s first instance and its deployment's handoff.
inline instance_config pd_member(const deployment_plan& t, pd_role role, const std::string& name) {
  instance_config ic = t.instances.front();
  ic.name = name;
  ic.role = role;
  ic.scheduler.role = role;
  ic.scheduler.pd = t.front.pd;
  return ic;
}

/// `t` as the deployment `members` (built from its first instance by pd_member).
inline deployment_plan& deploy(deployment_plan& t, std::vector<instance_config> members) {
  t.instances = std::move(members);
  t.front.disaggregated = false;
  for (const instance_config& ic : t.instances)
    t.front.disaggregated = t.front.disaggregated || ic.role != pd_role::mixed;
  return t;
}

/// The (one) instance of `r` in `role`.
inline const instance_result& instance_in(const full_result& r, pd_role role) {
  for (const instance_result& i : r.instances)
    if (i.role == role)
      return i;
  throw std::runtime_error("no instance in that role");
}

/// require_clean, and every instance drained with no violation of its own.
inline void require_clean_pd(const full_result& r) {
  require_clean(r);
  for (const instance_result& i : r.instances) {
    INFO(i.name);
    REQUIRE(i.scheduler.drained);
    REQUIRE(i.controller.invariant_violations == 0);
  }
}

}  // namespace kvtier::test
