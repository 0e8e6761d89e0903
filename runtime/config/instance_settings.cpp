#include "runtime/config/instance_settings.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/time_math.hpp"
#include "runtime/config/compute_config.hpp"
#include "runtime/config/storage_calibration.hpp"
#include "runtime/config/strict_json.hpp"
#include "storage/storage_backend.hpp"

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

// scheduler.*: batching, reservations and preemption, checked against the tiers a mode needs.
scheduler_options resolve_scheduler_options(const config& c, const replay_config& rc) {
  scheduler_options so;
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
  return so;
}

// links.*: the PCIe and NIC links, from the keys or a calibration file.
link_options resolve_links(const config& c) {
  link_options lo;
  lo.h2d_gbps = c.number(keys::links::h2d_gbps);
  lo.d2h_gbps = c.number(keys::links::d2h_gbps);
  lo.duplex_gbps = c.number(keys::links::duplex_gbps);
  lo.h2d_layer_latency_ns = us_to_ns(c.number(keys::links::h2d_layer_latency_us));
  lo.d2h_latency_ns = us_to_ns(c.number(keys::links::d2h_latency_us));
  lo.h2d_layer_wait_ns = us_to_ns(c.number(keys::links::h2d_layer_wait_us));
  lo.h2d_submit_ns_per_block = us_to_ns(c.number(keys::links::h2d_submit_us_per_block));
  if (c.is_set(keys::links::calibration))
    apply_calibration(c.text(keys::links::calibration), lo);
  lo.nic_gbps = c.number(keys::links::nic_gbps);
  lo.nic_latency_ns = us_to_ns(c.number(keys::links::nic_latency_us));
  return lo;
}

// The controller's prefetch from storage (storage.prefetch_*).
void resolve_prefetch(const config& c, controller_options& o) {
  o.prefetch = *parse_prefetch_policy(c.text(keys::storage::prefetch_policy));
  o.prefetch_threshold_tokens =
    static_cast<uint64_t>(c.integer(keys::storage::prefetch_threshold_tokens));
  o.prefetch_timeout_ns = time_from(c.number(keys::storage::prefetch_timeout_ms) * 1e6);
  o.prefetch_timeout_per_ki_token_ns =
    time_from(c.number(keys::storage::prefetch_timeout_per_ki_token_ms) * 1e6);
  o.prefetch_capacity_blocks =
    static_cast<uint32_t>(c.integer(keys::storage::prefetch_capacity_blocks));
}

}  // namespace

instance_config resolve_instance(const config& c, const replay_config& rc) {
  instance_config ic;
  ic.cache = rc.cache;
  controller_options& co = ic.controller;
  co.block_size = rc.block_size;
  co.storage_namespace = rc.storage_namespace;
  co.storage = rc.storage_blocks > 0;
  co.layers = rc.model.layers;

  scheduler_config& sc = ic.scheduler;
  sc.options = resolve_scheduler_options(c, rc);
  co.preemption = sc.options.preemption;
  resolve_prefetch(c, co);
  sc.compute = resolve_compute(c, rc.spec, rc.parallel);
  sc.device_blocks = rc.cache.device_blocks;
  sc.pd.storage_namespace = rc.storage_namespace;
  sc.output_caching = c.boolean(keys::cache::output_caching);
  if (sc.output_caching && rc.storage_blocks == 0)
    throw config_error("cache.output_caching: finished requests are written to the storage pool, "
                       "which has no capacity (set storage.capacity_blocks or "
                       "storage.capacity_tokens)");

  transfer_engine_options& eo = ic.engine;
  eo.links = resolve_links(c);
  sc.compute.layer_wait_ns = eo.links.h2d_layer_wait_ns;
  sc.compute.swap_in_submit_ns_per_block = eo.links.h2d_submit_ns_per_block;
  eo.layers = rc.model.layers;
  eo.block_bytes = rc.block_bytes();
  return ic;
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
    const std::string& backend = c.text(keys::storage::backend);
    if (parse_storage_backend_kind(backend) != storage_backend_kind::model)
      throw config_error("pd.transfer=storage: handed-off blocks are modelled only; set "
                         "storage.backend=model (got " + backend + ")");
  }
  return o;
}

router_options resolve_router(const config& c) {
  router_options o;
  const std::string& policy = c.text(keys::router::policy);
  o.policy = policy == "least_loaded"  ? route_policy::least_loaded
             : policy == "cache_aware" ? route_policy::cache_aware
                                       : route_policy::round_robin;
  o.session_affinity = c.boolean(keys::router::session_affinity);
  o.load_weight = c.number(keys::router::load_weight);
  return o;
}

void check_calibrations(const config& c) {
  link_options links;
  storage_options storage;
  if (c.is_set(keys::links::calibration))
    apply_calibration(c.text(keys::links::calibration), links);
  if (c.is_set(keys::storage::calibration))
    apply_storage_calibration(c.text(keys::storage::calibration), storage);
}

}  // namespace kvtier
