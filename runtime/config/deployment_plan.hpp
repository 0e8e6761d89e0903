#pragma once

// The deployment plan: everything a run of kvtier's actors needs, resolved from the config once
// and in one place (resolve_plan), with where each value came from. A plan is always a list of
// instances, each with its role and its actors' options, beside the storage pool they share and
// the front end that feeds them. Replays (virtual and wall clock) and `kvtier serve` spawn it
// alike (runtime/deployment.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/device/cuda_device.hpp"
#include "actors/front_end/front_end.hpp"
#include "actors/instance.hpp"
#include "core/run_modes.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/storage_settings.hpp"

namespace kvtier {

/// Who schedules the instances' requests: kvtier's scheduler behind its front end (replays), or
/// a live engine, beside which kvtier runs each instance's cache controller and transfer engine
/// (`kvtier serve`).
enum class scheduling : uint8_t { kvtier, engine };

/// What a run adds to its config: the command line's choices.
struct run_choices {
  replay_mode mode = replay_mode::full;
  scheduling scheduler = scheduling::kvtier;
  clock_mode clock = clock_mode::virtual_time;  ///< which clock the actors run on
  /// Modelled links or the real GPU (cuda: on the wall clock whatever `clock` says).
  copy_backend_kind backend = copy_backend_kind::modelled;
  bool verify = false;       ///< backend cuda: check every block's bytes wherever it lands
  uint64_t check_every = 0;  ///< invariant checks every N requests (hitrate) or commits
  /// Draws the faults (faults.*, pd.failure_rate) and the workload variant (trace.*).
  uint64_t seed = 0;
  /// Full mode, wall clock: the one instance's cache controller is a live server's (engine-sim).
  remote_controller remote;
};

/// How the traces are read and varied (trace.*); trace.time_scale is the front end's.
struct trace_plan {
  uint64_t max_line_bytes = 0;
  uint64_t max_document_bytes = 0;
  uint32_t session_copies = 1;
  uint64_t max_blocks_per_request = 0;
  /// The workload variant the seed draws (sim/trace/workload_variant.hpp).
  double sample_fraction = 1;
  double arrival_jitter_s = 0;
  double session_shift_s = 0;
};

/// A config key's value and where it came from.
struct resolved_key {
  std::string key;
  nlohmann::json value;
  value_source source;
};

struct deployment_plan {
  /// The run's config resolved: the model, the block size and tiers, the storage pool's shape
  /// and key namespace (what a hit-rate replay replays). Each instance's own tiers, which its
  /// group may override, are its `cache`.
  replay_config run;
  /// In cluster.instances order; always at least one (mixed-0 by default). A hit-rate plan has
  /// the one cache it replays, and no actor options.
  std::vector<instance_config> instances;
  /// The front end's settings: trace.time_scale, router.*, the PD handoff (pd.*).
  front_end_config front;
  storage_plan storage;
  scheduling scheduler = scheduling::kvtier;
  /// The real backend: PCIe transfers and step compute on the CUDA device (wall clock only),
  /// made from `cuda` by prepare_gpu.
  copy_backend_kind backend = copy_backend_kind::modelled;
  cuda_device_options cuda;
  trace_plan trace;
  bool timeseries = false;       ///< output.timeseries
  nlohmann::json model_summary;  ///< summary.json's `model` section
  /// Every key of the run's config, with its value and source, in the option table's order.
  std::vector<resolved_key> keys;
  /// Per instance (parallel to `instances`): the keys its group overrides.
  std::vector<std::vector<resolved_key>> overrides;

  bool disaggregated() const { return front.disaggregated; }
  /// Where the run's `key` came from.
  const value_source& source_of(key_name key) const;
};

/// Resolves `c` under the run's `choices`, once: every config value the run reads, checked
/// across keys. Throws config_error naming the keys (and the cluster group) that disagree.
deployment_plan resolve_plan(const config& c, const run_choices& choices);

/// The plan as JSON (`kvtier replay --print-plan`): each instance's role and tiers, the
/// storage backend, and every key with its value and source.
nlohmann::json plan_json(const deployment_plan& plan);

}  // namespace kvtier
