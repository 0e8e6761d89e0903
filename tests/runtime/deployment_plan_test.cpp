// The deployment plan (runtime/config/deployment_plan.hpp): always a list of instances, every key with
// where it came from, the storage backend's kind and payload in one place, and the run's choices
// checked where they meet the config. Runs in well under a second.

#include <catch2/catch.hpp>

#include "runtime/config/deployment_plan.hpp"

using namespace kvtier;

namespace {

const resolved_key& key_in(const std::vector<resolved_key>& keys, const std::string& name) {
  for (const resolved_key& k : keys)
    if (k.key == name)
      return k;
  throw std::runtime_error("no key " + name);
}

std::string error_of(const config& c, const run_choices& choices) {
  try {
    resolve_plan(c, choices);
  } catch (const config_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("deployment plan: every key with its value and where it came from", "[config][plan]") {
  config c;
  c.merge_json({{"scheduler", {{"max_num_seqs", 7}}}}, "mine.json");
  c.set("cache.block_size=32");
  c.set("preset.model=llama3-8b");
  deployment_plan p = resolve_plan(c, {});
  REQUIRE(p.keys.size() == option_specs().size());
  CHECK(p.source_of(keys::trace::time_scale).origin == value_origin::defaults);
  CHECK(p.source_of(keys::trace::time_scale).where == "configs/default.json");
  CHECK(p.source_of(keys::scheduler::max_num_seqs).origin == value_origin::file);
  CHECK(p.source_of(keys::scheduler::max_num_seqs).where == "mine.json");
  CHECK(key_in(p.keys, "scheduler.max_num_seqs").value == 7);
  CHECK(p.source_of(keys::cache::block_size).origin == value_origin::set);
  CHECK(p.source_of(keys::cache::block_size).where == "--set cache.block_size=32");
  CHECK(p.source_of(keys::model::layers).origin == value_origin::preset);
  CHECK(p.source_of(keys::model::layers).where == "preset.model=llama3-8b");
  // The values the keys resolve to are the plan's own fields.
  REQUIRE(p.instances.size() == 1);
  CHECK(p.instances[0].scheduler.options.max_num_seqs == 7);
  CHECK(p.instances[0].controller.block_size == 32);
  CHECK(p.run.model.layers == 32);
  CHECK(p.overrides.size() == 1);
  CHECK(p.overrides[0].empty());
}

TEST_CASE("deployment plan: a group's overrides are named per instance", "[config][plan]") {
  config c;
  c.set(R"(cluster.instances=[{"role": "prefill"},
        {"role": "decode", "overrides": {"cache.device_blocks": 500, "links.pd_gbps": 50}}])");
  deployment_plan p = resolve_plan(c, {});
  REQUIRE(p.instances.size() == 2);
  CHECK(p.disaggregated());
  CHECK(p.instances[0].role == pd_role::prefill);
  CHECK(p.instances[1].role == pd_role::decode);
  CHECK(p.instances[1].cache.device_blocks == 500);
  CHECK(p.instances[1].scheduler.pd.link_gbps == 50);
  CHECK(p.overrides[0].empty());
  const resolved_key& device = key_in(p.overrides[1], "cache.device_blocks");
  CHECK(device.value == 500);
  CHECK(device.source.origin == value_origin::cluster_override);
  CHECK(device.source.where == "cluster.instances[1].overrides");
  // cache.device_tokens gave way to the group's blocks: overridden too (to null).
  CHECK(key_in(p.overrides[1], "cache.device_tokens").value.is_null());
  nlohmann::json j = plan_json(p);
  CHECK(j["instances"][1]["role"] == "decode");
  CHECK(j["instances"][1]["overrides"]["links.pd_gbps"]["source"] == "cluster override");
  CHECK(j["keys"]["cache.block_size"]["source"] == "default");
}

TEST_CASE("deployment plan: the storage backend is an enum, its payload one field",
          "[config][plan]") {
  config c;
  CHECK(resolve_plan(c, {}).storage.backend.kind == storage_backend_kind::model);
  CHECK(resolve_plan(c, {}).storage.payload_bytes == 0);
  c.set("storage.backend=memory");
  deployment_plan p = resolve_plan(c, {});
  CHECK(p.storage.backend.kind == storage_backend_kind::memory);
  CHECK(p.storage.payload_bytes == p.run.block_bytes());
  c.set("storage.payload_bytes=4096");
  CHECK(resolve_plan(c, {}).storage.payload_bytes == 4096);
  CHECK(plan_json(resolve_plan(c, {}))["storage"]["backend"] == "memory");
  // A live server's controller keeps the pool and its bytes.
  run_choices remote;
  remote.clock = clock_mode::wall;
  remote.remote.spawn = [](caf::actor_system&, const sim_clock&) {
    return cache_controller_actor{};
  };
  deployment_plan r = resolve_plan(c, remote);
  CHECK(r.storage.backend.kind == storage_backend_kind::model);
  CHECK(r.storage.payload_bytes == 0);
  CHECK(static_cast<bool>(r.instances[0].remote));
}

TEST_CASE("deployment plan: the run's choices are checked against the config", "[config][plan]") {
  config cluster;
  cluster.set(R"(cluster.instances=[{"role": "mixed", "count": 2}])");
  run_choices serve;
  serve.scheduler = scheduling::engine;
  serve.clock = clock_mode::wall;
  CHECK_THAT(error_of(cluster, serve), Catch::Contains("kvtier serve runs one instance"));
  run_choices remote;
  remote.remote.spawn = [](caf::actor_system&, const sim_clock&) {
    return cache_controller_actor{};
  };
  CHECK_THAT(error_of(cluster, remote), Catch::Contains("a live server is one instance's"));
  config faults;
  faults.set("faults.get_fail_probability=0.1");
  run_choices wall;
  wall.clock = clock_mode::wall;
  CHECK_THAT(error_of(faults, wall), Catch::Contains("deterministic in virtual time only"));
  CHECK_THAT(error_of(faults, serve), Catch::Contains("kvtier serve runs on the wall clock"));
  CHECK(error_of(faults, {}) == "no error");
  run_choices hitrate;
  hitrate.mode = replay_mode::hitrate;
  CHECK_THAT(error_of(faults, hitrate), Catch::Contains("faults need timing"));
  // --check-every reaches every instance of a cluster.
  run_choices checked;
  checked.check_every = 5;
  for (const instance_config& ic : resolve_plan(cluster, checked).instances)
    CHECK(ic.controller.check_every == 5);
  // Serve's GPU is the engine's, attached later; a replay's is its own, logged.
  run_choices gpu = serve;
  gpu.backend = copy_backend_kind::cuda;
  deployment_plan g = resolve_plan(config(), gpu);
  CHECK(g.cuda.attach_later);
  CHECK_FALSE(g.instances[0].controller.log);
  gpu.scheduler = scheduling::kvtier;
  g = resolve_plan(config(), gpu);
  CHECK_FALSE(g.cuda.attach_later);
  CHECK(g.instances[0].controller.log);
}
