#pragma once

// What the PD scenario tests share: an instance of a deployment built from the deployment's own
// settings, an instance found by its role, and the checks every drained PD run must pass.

#include <stdexcept>
#include <string>

#include "tests/sim/scenario.hpp"

namespace kvtier::test {

/// An instance of `t`'s deployment in `role`, with the deployment's settings.
inline instance_config pd_member(const timed_config& t, pd_role role, const std::string& name) {
  instance_config ic;
  ic.name = name;
  ic.role = role;
  ic.cache = t.cache;
  ic.controller = t.controller;
  ic.scheduler = t.scheduler;
  ic.engine = t.engine;
  ic.scheduler.role = role;
  ic.scheduler.pd = t.pd;
  ic.scheduler.block_bytes = t.block_bytes;
  return ic;
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
