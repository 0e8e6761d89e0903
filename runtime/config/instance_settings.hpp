#pragma once

// One instance's settings: what the cache.*, scheduler.*, compute.*, links.* and pd.* keys give
// its cache controller, scheduler and transfer engine. These are the keys a cluster.instances
// group may override (cluster_config.hpp), so each instance's are read from its own config.

#include "actors/instance.hpp"
#include "model/front_end/router.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"

namespace kvtier {

/// The instance `c` describes, with `tiers` its cache.* keys resolved over the run's model
/// (resolve_tiers): its tiers, controller, scheduler and links. Its name and role stay the
/// defaults (mixed-0, mixed). Throws config_error naming the keys that disagree.
instance_config resolve_instance(const config& c, const replay_config& tiers);

/// The PD handoff's settings (pd.*, links.pd_*); throws config_error when pd.transfer=storage
/// has no pool to go through, or one whose bytes are real.
pd_options resolve_pd(const config& c, const replay_config& tiers);

/// The router's settings (router.*).
router_options resolve_router(const config& c);

/// Reads the calibration files the config names (links.calibration, storage.calibration) and
/// throws config_error as resolving them would: a hit-rate replay uses neither, but a file given
/// is checked all the same, so that a mistake is not found only when a timed run starts.
void check_calibrations(const config& c);

}  // namespace kvtier
