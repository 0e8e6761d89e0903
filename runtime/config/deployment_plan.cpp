#include "runtime/config/deployment_plan.hpp"

#include "runtime/config/cluster_config.hpp"
#include "runtime/config/compute_config.hpp"
#include "runtime/config/fault_config.hpp"
#include "runtime/config/instance_settings.hpp"
#include "runtime/config/time_limits.hpp"

namespace kvtier {

namespace {

trace_plan resolve_trace(const config& c) {
  trace_plan t;
  t.max_line_bytes = static_cast<uint64_t>(c.integer(keys::trace::max_line_bytes));
  t.max_document_bytes = static_cast<uint64_t>(c.integer(keys::trace::max_document_bytes));
  t.session_copies = static_cast<uint32_t>(c.integer(keys::trace::session_copies));
  t.max_blocks_per_request = static_cast<uint64_t>(c.integer(keys::trace::max_blocks_per_request));
  t.sample_fraction = c.number(keys::trace::sample_fraction);
  t.arrival_jitter_s = c.number(keys::trace::arrival_jitter_s);
  t.session_shift_s = c.number(keys::trace::session_shift_s);
  return t;
}

std::vector<resolved_key> keys_of(const config& c) {
  std::vector<resolved_key> out;
  for (const option_spec& s : option_specs())
    out.push_back({s.key, c.value_of(s.key), c.source_of(s.key)});
  return out;
}

// The keys whose value a group's config takes from somewhere else than the run's, or changes
// (a group's cache.device_blocks clears the run's cache.device_tokens).
std::vector<resolved_key> overridden(const config& group, const std::vector<resolved_key>& run) {
  std::vector<resolved_key> out;
  for (const resolved_key& k : run) {
    value_source s = group.source_of(k.key);
    const nlohmann::json& v = group.value_of(k.key);
    if (s.where != k.source.where || v != k.value)
      out.push_back({k.key, v, s});
  }
  return out;
}

// A prefill or decode instance: its role, the handoff's settings as its group gives them, and
// what its role changes.
void give_role(instance_config& ic, pd_role role, const config& settings,
               const replay_config& tiers) {
  ic.role = role;
  if (role == pd_role::mixed)
    return;
  ic.scheduler.role = role;
  ic.scheduler.block_bytes = tiers.block_bytes();
  ic.scheduler.pd = resolve_pd(settings, tiers);
  if (role == pd_role::prefill)
    ic.scheduler.output_caching = false;  // a prefill instance finishes nothing
  // Write-through to storage stores every full block P commits under its shared key anyway: P
  // writes only the rest for the handoff (pd_options::writes).
  if (role == pd_role::prefill && ic.cache.policy == write_policy::write_through &&
      ic.cache.storage == storage_write::always && ic.cache.host_blocks > 0 &&
      ic.cache.storage_tier)
    ic.scheduler.pd.writes = handoff_writes::unshared_blocks;
}

// cluster.instances, each from its group's config: the tiers (cache.*) over the run's model,
// then the actors' options.
void resolve_cluster_instances(const config& c, deployment_plan& p) {
  p.front.pd = resolve_pd(c, p.run);
  for (const instance_spec& spec : resolve_cluster(c)) {
    replay_config tiers = p.run;
    resolve_tiers(spec.settings, tiers);
    instance_config ic = resolve_instance(spec.settings, tiers);
    ic.name = spec.name;
    give_role(ic, spec.role, spec.settings, tiers);
    p.front.disaggregated = p.front.disaggregated || spec.role != pd_role::mixed;
    p.instances.push_back(std::move(ic));
    p.overrides.push_back(overridden(spec.settings, p.keys));
  }
}

// The faults strike the storage pool; they are drawn deterministically on the virtual clock only.
void plan_faults(const config& c, const run_choices& choices, deployment_plan& p) {
  fault_options& f = p.storage.pool.faults;
  f = resolve_faults(c, choices.seed, p.run.storage_nodes, p.run.storage_blocks);
  if (!f.any())
    return;
  if (p.scheduler == scheduling::engine)
    throw config_error("faults.*: faults are deterministic in virtual time only; kvtier serve "
                       "runs on the wall clock");
  if (choices.clock == clock_mode::wall || choices.backend != copy_backend_kind::modelled)
    throw config_error("faults.*: faults are deterministic in virtual time only; replay them "
                       "without --clock wall and --backend cuda");
}

// The real backend: a KV cache of the model's shape and the configured device and host blocks
// on the GPU (an engine's tensors, attached later, under kvtier serve); with `verify`, every
// block is checked wherever it lands.
void plan_gpu(bool one_instance, const run_choices& choices, deployment_plan& p) {
  if (p.scheduler == scheduling::kvtier) {
    if (p.disaggregated())
      throw config_error("--backend cuda does not replay prefill/decode deployments: "
                         "cluster.instances with prefill and decode roles runs on the modelled "
                         "backend only (leave out --backend cuda)");
    if (!one_instance)
      throw config_error("--backend cuda replays one instance: cluster.instances must be one "
                         "mixed instance without overrides");
  }
  if (choices.backend == copy_backend_kind::shm && p.scheduler != scheduling::engine)
    throw config_error("--backend shm copies into an engine's KV in shared memory: it is kvtier "
                       "serve's (docs/protocol.md, \"Real mode on the CPU\")");
  p.backend = choices.backend;
  cuda_device_options& o = p.cuda;
  o.shape = p.run.model;
  o.block_size = p.run.block_size;
  o.device_blocks = p.run.cache.device_blocks;
  o.host_blocks = p.run.cache.host_blocks;
  o.verify = choices.verify;
  o.attach_later = p.scheduler == scheduling::engine;
  o.memory = choices.backend == copy_backend_kind::shm ? engine_memory::shm : engine_memory::cuda_ipc;
  controller_options& co = p.instances.front().controller;
  // The reply of a step goes before its swap-in lands: the engine waits on per-layer events.
  co.grant_early = true;
  co.verify = choices.verify;
  co.log = p.scheduler == scheduling::kvtier;  // bench emulation's and the replay's timeline
}

// The actors' options: every instance, the front end, the pool, and what the run's choices add.
void plan_actors(const config& c, const run_choices& choices, deployment_plan& p) {
  const bool one_instance = single_instance(c);
  if (one_instance) {
    p.instances.push_back(resolve_instance(c, p.run));
    p.overrides.emplace_back();
  } else {
    resolve_cluster_instances(c, p);
  }
  p.front.router = resolve_router(c);
  p.storage = resolve_storage(c, p.run);
  if (p.scheduler == scheduling::engine && !one_instance)
    throw config_error("cluster.instances: kvtier serve runs one instance (the engine's); "
                       "remove cluster.instances");
  plan_faults(c, choices, p);
  p.front.pd.seed = choices.seed;
  for (instance_config& ic : p.instances) {
    ic.controller.check_every = choices.check_every;
    // A live engine waits for its step's grant, not for the step's tree work (docs/design.md,
    // "Tree work after the reply"). In real mode a step's reads of what it computes are held for
    // the next commit's fence (docs/protocol.md, "Saves"), which a second batch of the step's
    // copies would pass: its tree work stays in the step.
    if (p.scheduler == scheduling::engine && choices.backend == copy_backend_kind::modelled)
      ic.controller.tree_work = tree_work_timing::after_reply;
  }
  if (choices.backend != copy_backend_kind::modelled)
    plan_gpu(one_instance, choices, p);
  if (choices.remote) {
    if (!one_instance)
      throw config_error("cluster.instances: a live server is one instance's controller");
    p.instances.front().remote = choices.remote;
    // The server keeps the pool and its bytes.
    p.storage.backend.kind = storage_backend_kind::model;
    p.storage.payload_bytes = 0;
  }
  for (const instance_config& ic : p.instances)
    check_time_limits(ic, p.storage.pool);
}

// A hit-rate replay: the run's one cache, and no clock for faults or a time series.
void plan_hitrate(const config& c, const run_choices& choices, deployment_plan& p) {
  check_calibrations(c);
  if (resolve_faults(c, choices.seed, p.run.storage_nodes, p.run.storage_blocks).any())
    throw config_error("faults.*: faults need timing: --mode full (hit-rate replays have no "
                       "clock to inject them on)");
  if (p.timeseries)
    throw config_error("output.timeseries: a time series needs timing: --mode full (hit-rate "
                       "replays have no clock)");
  instance_config ic;
  ic.cache = p.run.cache;
  ic.controller.block_size = p.run.block_size;
  p.instances.push_back(std::move(ic));
  p.overrides.emplace_back();
}

nlohmann::json keys_json(const std::vector<resolved_key>& keys) {
  nlohmann::json out = nlohmann::json::object();
  for (const resolved_key& k : keys)
    out[k.key] = {{"value", k.value}, {"source", to_string(k.source.origin)},
                  {"where", k.source.where}};
  return out;
}

}  // namespace

const value_source& deployment_plan::source_of(key_name key) const {
  for (const resolved_key& k : keys)
    if (k.key == key.name)
      return k.source;
  throw config_error(std::string("the plan has no key ") + key.name);
}

deployment_plan resolve_plan(const config& c, const run_choices& choices) {
  deployment_plan p;
  p.run = resolve(c);
  p.scheduler = choices.scheduler;
  p.keys = keys_of(c);
  p.trace = resolve_trace(c);
  p.front.time_scale = c.number(keys::trace::time_scale);
  p.timeseries = c.boolean(keys::output::timeseries);
  p.model_summary = model_summary(c, p.run);
  if (choices.mode == replay_mode::hitrate)
    plan_hitrate(c, choices, p);
  else
    plan_actors(c, choices, p);
  return p;
}

nlohmann::json plan_json(const deployment_plan& p) {
  nlohmann::json instances = nlohmann::json::array();
  for (size_t i = 0; i < p.instances.size(); ++i) {
    const instance_config& ic = p.instances[i];
    instances.push_back({{"name", ic.name},
                         {"role", to_string(ic.role)},
                         {"block_size", ic.controller.block_size},
                         {"device_blocks", ic.cache.device_blocks},
                         {"host_blocks", ic.cache.host_blocks},
                         {"overrides", keys_json(p.overrides[i])}});
  }
  return {{"scheduling", p.scheduler == scheduling::kvtier ? "kvtier" : "engine"},
          {"disaggregated", p.disaggregated()},
          {"backend", p.backend == copy_backend_kind::cuda  ? "cuda"
                      : p.backend == copy_backend_kind::shm ? "shm"
                                                            : "modelled"},
          {"instances", instances},
          {"storage",
           {{"backend", to_string(p.storage.backend.kind)},
            {"nodes", p.storage.pool.nodes},
            {"capacity_blocks", p.storage.pool.capacity_blocks},
            {"payload_bytes", p.storage.payload_bytes}}},
          {"keys", keys_json(p.keys)}};
}

}  // namespace kvtier
