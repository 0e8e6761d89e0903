#include "runtime/config/timed_config.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "storage/redis_backend.hpp"
#include "core/time_math.hpp"
#include "runtime/config/compute_config.hpp"
#include "runtime/config/fault_config.hpp"
#include "runtime/config/redis_secrets.hpp"
#include "runtime/config/storage_calibration.hpp"
#include "runtime/config/cluster_config.hpp"
#include "runtime/config/strict_json.hpp"

namespace kvtier {

namespace {

// Reads a calibration written by `kvtier bench transfer --emit-calibration` into `links`.
void apply_calibration(const std::string& path, link_options& links) {
  nlohmann::json j;
  try {
    j = read_json_file(path, "calibration file");
  } catch (const config_error& e) {
    throw config_error(std::string("links.calibration: ") + e.what());
  }
  auto number = [&](const char* section, const char* field, number_key key) {
    const nlohmann::json* v = &j;
    std::string name = field;
    if (section) {
      name = std::string(section) + "." + field;
      if (!j.contains(section) || !j[section].is_object())
        throw config_error("links.calibration: " + path + ": missing object '" + section + "'");
      v = &j[section];
    }
    // The range of the config key the value replaces.
    const option_spec& range = option_spec_of(key);
    const nlohmann::json* x = v->contains(field) ? &(*v)[field] : nullptr;
    if (x == nullptr || !x->is_number() || !std::isfinite(x->get<double>()) ||
        x->get<double>() < range.min || x->get<double>() > range.max) {
      throw config_error("links.calibration: " + path + ": field '" + name + "' (it replaces " +
                         key.name + "): expected " + expected_value_text(range) + ", got " +
                         (x ? x->dump() : std::string("nothing")));
    }
    return x->get<double>();
  };
  if (j.value("schema", "") != "kvtier.calibration/1")
    throw config_error("links.calibration: " + path +
                       ": field 'schema': expected \"kvtier.calibration/1\"");
  links.h2d_gbps = number("h2d", "bandwidth_gbps", keys::links::h2d_gbps);
  links.h2d_layer_latency_ns =
    us_to_ns(number("h2d", "layer_latency_us", keys::links::h2d_layer_latency_us));
  links.d2h_gbps = number("d2h", "bandwidth_gbps", keys::links::d2h_gbps);
  links.d2h_latency_ns = us_to_ns(number("d2h", "latency_us", keys::links::d2h_latency_us));
  links.duplex_gbps = number(nullptr, "duplex_gbps", keys::links::duplex_gbps);
  // Files from before the stall was measured have no compute section: the key's value stays.
  if (j.contains("compute"))
    links.h2d_layer_wait_ns =
      us_to_ns(number("compute", "layer_wait_us", keys::links::h2d_layer_wait_us));
  // Measured only from a replay's steps (bench emulation --emit-calibration): the key's value
  // stays where the file has none.
  if (j["h2d"].contains("submit_us_per_block"))
    links.h2d_submit_ns_per_block =
      us_to_ns(number("h2d", "submit_us_per_block", keys::links::h2d_submit_us_per_block));
}

// storage.redis_cluster: at least one seed, each host:port.
void check_cluster_seeds(const std::vector<std::string>& seeds) {
  if (seeds.empty())
    throw config_error("storage.redis_cluster: storage.backend=redis_cluster needs at least one "
                       "seed node (\"host:port\"); none given");
  for (const std::string& a : seeds) {
    try {
      parse_redis_address(a);
    } catch (const std::invalid_argument&) {
      throw config_error("storage.redis_cluster: '" + a + "': expected host:port");
    }
  }
}

// The storage.backend keys; a list that does not match storage.nodes is an error that says so.
void resolve_storage_backend(const config& c, const replay_config& rc, timed_config& t) {
  backend_options& b = t.storage_backend;
  b.kind = c.text(keys::storage::backend);
  b.ns = {rc.model.name, rc.model.kv_dtype};
  b.nodes = rc.storage_nodes;
  b.redis = c.text_list(keys::storage::redis);
  b.redis_ttl_s = static_cast<uint32_t>(c.integer(keys::storage::redis_ttl_s));
  b.redis_cluster = c.text_list(keys::storage::redis_cluster);
  if (b.kind == "redis" || b.kind == "redis_cluster") {
    b.redis_auth = resolve_redis_access(c);
    if (c.is_set(keys::storage::redis_failover_wait_s))
      b.redis_failover_wait_ns =
        static_cast<int64_t>(c.number(keys::storage::redis_failover_wait_s) * 1e9);
  }
  b.file_dirs = c.text_list(keys::storage::file_dirs);
  b.file_direct = c.boolean(keys::storage::file_direct);
  b.file_quota_bytes = static_cast<uint64_t>(c.integer(keys::storage::file_quota_bytes));
  auto one_per_node = [&](text_list_key key, size_t n) {
    if (n == 0)
      throw config_error(std::string(key.name) + ": storage.backend=" + b.kind +
                         " needs one entry per storage node; none given");
    if (n != rc.storage_nodes)
      throw config_error(std::string(key.name) + ": storage.backend=" + b.kind +
                         " needs one entry per storage node: " + std::to_string(n) +
                         " given, storage.nodes is " + std::to_string(rc.storage_nodes) +
                         " (set storage.nodes=" + std::to_string(n) + ")");
  };
  if (b.kind == "redis") {
    one_per_node(keys::storage::redis, b.redis.size());
    for (const std::string& a : b.redis) {
      try {
        parse_redis_address(a);
      } catch (const std::invalid_argument& e) {
        throw config_error(e.what());
      }
    }
  }
  if (b.kind == "redis_cluster")
    check_cluster_seeds(b.redis_cluster);
  if (b.kind == "file")
    one_per_node(keys::storage::file_dirs, b.file_dirs.size());
  t.storage_payload_bytes = b.kind == "model" ? 0
                            : c.is_set(keys::storage::payload_bytes)
                              ? static_cast<uint64_t>(c.integer(keys::storage::payload_bytes))
                              : rc.block_bytes();
  if (c.is_set(keys::storage::max_inflight_bytes))
    t.storage_max_inflight_bytes =
      static_cast<uint64_t>(c.integer(keys::storage::max_inflight_bytes));
}

}  // namespace

namespace {

timed_config resolve_one(const config& c, const replay_config& rc) {
  timed_config t;
  t.cache = rc.cache;
  t.block_bytes = rc.block_bytes();
  t.controller.block_size = rc.block_size;
  t.controller.storage_namespace = rc.storage_namespace;
  t.controller.storage = rc.storage_blocks > 0;
  t.controller.layers = rc.model.layers;

  scheduler_options& so = t.scheduler.options;
  so.block_size = rc.block_size;
  so.max_num_seqs = static_cast<uint32_t>(c.integer(keys::scheduler::max_num_seqs));
  so.token_budget = static_cast<uint32_t>(c.integer(keys::scheduler::token_budget));
  so.reserve_output_blocks = c.number(keys::scheduler::reserve_output_blocks);
  so.reserve_decay = c.number(keys::scheduler::reserve_decay);
  so.reserve_min = static_cast<uint32_t>(c.integer(keys::scheduler::reserve_min));
  so.probe_limit = static_cast<uint32_t>(c.integer(keys::scheduler::probe_limit));
  so.preemption = *parse_preemption_mode(c.text(keys::scheduler::preemption));
  if (so.preemption == preemption_mode::save_to_storage && rc.storage_blocks == 0)
    throw config_error("scheduler.preemption=save_to_storage writes preempted requests' blocks to "
                       "storage, but there is no storage tier: set storage.capacity_tokens (or "
                       "storage.capacity_blocks) above 0, or choose recompute or swap_to_host");
  if (so.preemption == preemption_mode::swap_to_host && rc.cache.host_blocks == 0)
    throw config_error("scheduler.preemption=swap_to_host moves preempted requests' blocks to "
                       "host memory, but there is no host tier: set cache.host_tokens (or "
                       "cache.host_blocks) above 0, or choose recompute");
  t.controller.preemption = so.preemption;
  t.controller.prefetch = *parse_prefetch_policy(c.text(keys::storage::prefetch_policy));
  t.controller.prefetch_threshold_tokens =
    static_cast<uint64_t>(c.integer(keys::storage::prefetch_threshold_tokens));
  t.controller.prefetch_timeout_ns = time_from(c.number(keys::storage::prefetch_timeout_ms) * 1e6);
  t.controller.prefetch_timeout_per_ki_token_ns =
    time_from(c.number(keys::storage::prefetch_timeout_per_ki_token_ms) * 1e6);
  t.controller.prefetch_capacity_blocks =
    static_cast<uint32_t>(c.integer(keys::storage::prefetch_capacity_blocks));
  t.scheduler.compute = resolve_compute(c, rc.spec, rc.parallel);
  t.scheduler.device_blocks = rc.cache.device_blocks;
  t.scheduler.pd.storage_namespace = rc.storage_namespace;
  t.scheduler.output_caching = c.boolean(keys::cache::output_caching);
  if (t.scheduler.output_caching && rc.storage_blocks == 0)
    throw config_error("cache.output_caching: finished requests are written to the storage pool, "
                       "which has no capacity (set storage.capacity_blocks or "
                       "storage.capacity_tokens)");
  t.time_scale = c.number(keys::trace::time_scale);

  link_options& lo = t.engine.links;
  lo.h2d_gbps = c.number(keys::links::h2d_gbps);
  lo.d2h_gbps = c.number(keys::links::d2h_gbps);
  lo.duplex_gbps = c.number(keys::links::duplex_gbps);
  lo.h2d_layer_latency_ns = us_to_ns(c.number(keys::links::h2d_layer_latency_us));
  lo.d2h_latency_ns = us_to_ns(c.number(keys::links::d2h_latency_us));
  lo.h2d_layer_wait_ns = us_to_ns(c.number(keys::links::h2d_layer_wait_us));
  lo.h2d_submit_ns_per_block = us_to_ns(c.number(keys::links::h2d_submit_us_per_block));
  if (c.is_set(keys::links::calibration))
    apply_calibration(c.text(keys::links::calibration), lo);
  t.scheduler.compute.layer_wait_ns = lo.h2d_layer_wait_ns;
  t.scheduler.compute.swap_in_submit_ns_per_block = lo.h2d_submit_ns_per_block;
  lo.nic_gbps = c.number(keys::links::nic_gbps);
  lo.nic_latency_ns = us_to_ns(c.number(keys::links::nic_latency_us));
  t.engine.layers = rc.model.layers;
  t.engine.block_bytes = rc.block_bytes();

  t.storage.capacity_blocks = rc.storage_blocks;
  t.storage.nodes = rc.storage_nodes;
  t.storage.read_gbps = c.number(keys::storage::read_gbps);
  t.storage.write_gbps = c.number(keys::storage::write_gbps);
  t.storage.op_latency_ns = us_to_ns(c.number(keys::storage::op_latency_us));
  if (c.is_set(keys::storage::read_op_latency_us))
    t.storage.read_op_latency_ns = us_to_ns(c.number(keys::storage::read_op_latency_us));
  t.storage.stream_read_gbps = c.number(keys::storage::stream_read_gbps);
  t.storage.stream_write_gbps = c.number(keys::storage::stream_write_gbps);
  if (c.is_set(keys::storage::calibration))
    apply_storage_calibration(c.text(keys::storage::calibration), t.storage);
  t.storage.name_space = rc.storage_namespace;
  t.storage.pool = rc.storage_pool;
  resolve_storage_backend(c, rc, t);
  return t;
}

pd_options resolve_pd(const config& c, const replay_config& rc) {
  pd_options o;
  o.transfer = c.text(keys::pd::transfer) == "storage" ? pd_transfer::storage : pd_transfer::direct;
  o.link_gbps = c.number(keys::links::pd_gbps);
  o.link_latency_ns = us_to_ns(c.number(keys::links::pd_latency_us));
  o.wait_decode_resource_ns = time_from(c.number(keys::pd::wait_decode_resource_s) * 1e9);
  o.retry_decode_resource = c.boolean(keys::pd::retry_decode_resource);
  o.retry_interval_ns = time_from(c.number(keys::pd::retry_interval_ms) * 1e6);
  o.on_failure = c.text(keys::pd::on_handoff_failure) == "recompute"
                   ? handoff_failure_rule::recompute
                   : handoff_failure_rule::error;
  o.failure_rate = c.number(keys::pd::failure_rate);
  o.decode_extra_blocks = static_cast<uint32_t>(c.integer(keys::pd::decode_extra_blocks));
  o.storage_namespace = rc.storage_namespace;
  if (o.transfer == pd_transfer::storage) {
    if (rc.storage_blocks == 0)
      throw config_error("pd.transfer=storage: the handoff goes through the storage pool, which "
                         "has no capacity (set storage.capacity_blocks or storage.capacity_tokens)");
    if (c.text(keys::storage::backend) != "model")
      throw config_error("pd.transfer=storage: handed-off blocks are modelled only; set "
                         "storage.backend=model (got " + c.text(keys::storage::backend) + ")");
  }
  return o;
}

route_policy route_policy_of(const std::string& name) {
  if (name == "least_loaded")
    return route_policy::least_loaded;
  if (name == "cache_aware")
    return route_policy::cache_aware;
  return route_policy::round_robin;
}

}  // namespace

void check_calibrations(const config& c) {
  link_options links;
  storage_options storage;
  if (c.is_set(keys::links::calibration))
    apply_calibration(c.text(keys::links::calibration), links);
  if (c.is_set(keys::storage::calibration))
    apply_storage_calibration(c.text(keys::storage::calibration), storage);
}

timed_config resolve_timed(const config& c, const replay_config& rc) {
  timed_config t = resolve_one(c, rc);
  t.router.policy = route_policy_of(c.text(keys::router::policy));
  t.router.session_affinity = c.boolean(keys::router::session_affinity);
  t.router.load_weight = c.number(keys::router::load_weight);
  std::vector<instance_spec> specs = resolve_cluster(c);
  if (single_instance(c))
    return t;
  t.pd = resolve_pd(c, rc);
  for (const instance_spec& spec : specs) {
    timed_config one = resolve_one(spec.settings, resolve(spec.settings));
    instance_config ic;
    ic.name = spec.name;
    ic.cache = one.cache;
    ic.controller = one.controller;
    ic.scheduler = one.scheduler;
    ic.engine = one.engine;
    ic.role = static_cast<pd_role>(spec.role);
    if (ic.role != pd_role::mixed) {
      t.disaggregated = true;
      ic.scheduler.role = ic.role;
      ic.scheduler.block_bytes = one.block_bytes;
      ic.scheduler.pd = resolve_pd(spec.settings, resolve(spec.settings));
      if (ic.role == pd_role::prefill)
        ic.scheduler.output_caching = false;  // a prefill instance finishes nothing
      if (ic.role == pd_role::prefill && ic.cache.policy == write_policy::write_through
          && ic.cache.storage == storage_write::always && ic.cache.host_blocks > 0
          && ic.cache.storage_tier)
        ic.scheduler.pd.writes = handoff_writes::unshared_blocks;
    }
    t.instances.push_back(std::move(ic));
  }
  return t;
}

}  // namespace kvtier

namespace kvtier {

void use_cuda_backend(timed_config& t, const replay_config& rc, bool verify) {
  if (t.disaggregated)
    throw config_error("--backend cuda does not replay prefill/decode deployments: "
                       "cluster.instances with prefill and decode roles runs on the modelled "
                       "backend only (leave out --backend cuda)");
  if (!t.instances.empty())
    throw config_error("--backend cuda replays one instance: cluster.instances must be one mixed "
                       "instance without overrides");
  t.backend = copy_backend_kind::cuda;
  cuda_device_options& o = t.cuda_options;
  o.shape = rc.model;
  o.block_size = rc.block_size;
  o.device_blocks = rc.cache.device_blocks;
  o.host_blocks = rc.cache.host_blocks;
  o.verify = verify;
  t.controller.grant_early = true;
  t.controller.verify = verify;
  t.controller.log = true;
}

}  // namespace kvtier
