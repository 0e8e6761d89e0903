// cluster.instances: groups, counts, overrides, and errors that name the item and field.

#include <catch2/catch.hpp>

#include "runtime/config/cluster_config.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/deployment_plan.hpp"

using namespace kvtier;

TEST_CASE("cluster config: the default is one mixed instance", "[config][cluster]") {
  config c;
  auto specs = resolve_cluster(c);
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].name == "mixed-0");
  CHECK(single_instance(c));
  deployment_plan t = resolve_plan(c, {});
  REQUIRE(t.instances.size() == 1);  // a plan is always a list of instances
  CHECK(t.instances[0].name == "mixed-0");
  CHECK(t.instances[0].role == pd_role::mixed);
  CHECK_FALSE(t.disaggregated());
}

TEST_CASE("cluster config: groups expand by count and apply their overrides", "[config][cluster]") {
  config c;
  c.set(R"(cluster.instances=[{"role": "mixed", "count": 2},
        {"role": "mixed", "overrides": {"cache": {"device_blocks": 100}, "scheduler.max_num_seqs": 3}}])");
  c.set("router.policy=cache_aware");
  CHECK_FALSE(single_instance(c));
  deployment_plan t = resolve_plan(c, {});
  REQUIRE(t.instances.size() == 3);
  CHECK(t.instances[0].name == "mixed-0");
  CHECK(t.instances[2].name == "mixed-2");
  CHECK(t.instances[0].cache.device_blocks == t.run.cache.device_blocks);
  CHECK(t.instances[2].cache.device_blocks == 100);
  CHECK(t.instances[2].scheduler.device_blocks == 100);
  CHECK(t.instances[2].scheduler.options.max_num_seqs == 3);
  CHECK(t.instances[1].scheduler.options.max_num_seqs ==
        t.instances[0].scheduler.options.max_num_seqs);
  CHECK(t.instances[1].scheduler.options.max_num_seqs != 3);
  CHECK(t.front.router.policy == route_policy::cache_aware);
}

TEST_CASE("cluster config: bad groups are errors naming the item and field", "[config][cluster]") {
  auto error_of = [](const std::string& value) {
    config c;
    c.set("cluster.instances=" + value);
    try {
      resolve_cluster(c);
    } catch (const config_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("[]"), Catch::Contains("at least one"));
  CHECK_THAT(error_of("[3]"), Catch::Contains("cluster.instances[0]: expected an object"));
  CHECK_THAT(error_of(R"([{"count": 2}])"), Catch::Contains("cluster.instances[0]: field 'role'"));
  CHECK_THAT(error_of(R"([{"role": "mixed"}, {"role": "big"}])"),
             Catch::Contains("cluster.instances[1].role"));
  CHECK_THAT(error_of(R"([{"role": "mixed", "count": 0}])"),
             Catch::Contains("cluster.instances[0].count"));
  CHECK_THAT(error_of(R"([{"role": "mixed", "size": 2}])"), Catch::Contains("unknown field 'size'"));
  CHECK_THAT(error_of(R"([{"role": "mixed", "overrides": {"model.layers": 4}}])"),
             Catch::Contains("model.layers: only cache.*"));
  CHECK_THAT(error_of(R"([{"role": "mixed", "overrides": {"cache.nonsense": 4}}])"),
             Catch::Contains("cache.nonsense"));
  CHECK_THAT(error_of(R"([{"role": "mixed", "overrides": {"cache.eviction": "fifo"}}])"),
             Catch::Contains("cluster.instances[0].overrides"));
  CHECK_THAT(error_of(R"([{"role": "prefill"}])"), Catch::Contains("prefill and decode"));
  CHECK_THAT(error_of(R"([{"role": "decode", "count": 2}])"), Catch::Contains("0 prefill"));
  CHECK_THAT(error_of(R"([{"role": "prefill"}, {"role": "decode"}, {"role": "mixed"}])"),
             Catch::Contains("no mixed ones (got 1 mixed, 1 prefill, 1 decode)"));
  config bad;
  CHECK_THROWS_AS(bad.set("cluster.instances=5"), config_error);
}

TEST_CASE("cluster config: prefill and decode roles make a disaggregated deployment",
          "[config][cluster][pd]") {
  config c;
  c.set(R"(cluster.instances=[{"role": "prefill", "count": 2},
        {"role": "decode", "overrides": {"links.pd_gbps": 50}}])");
  c.set("pd.transfer=storage");
  c.set("pd.on_handoff_failure=recompute");
  c.set("pd.wait_decode_resource_s=2");
  deployment_plan t = resolve_plan(c, {});
  REQUIRE(t.instances.size() == 3);
  CHECK(t.disaggregated());
  CHECK(t.instances[0].name == "prefill-0");
  CHECK(t.instances[1].name == "prefill-1");
  CHECK(t.instances[2].name == "decode-0");
  CHECK(t.instances[0].scheduler.role == pd_role::prefill);
  CHECK(t.instances[2].scheduler.role == pd_role::decode);
  CHECK(t.instances[2].scheduler.pd.link_gbps == 50);
  CHECK(t.instances[0].scheduler.pd.link_gbps == 25);
  CHECK(t.front.pd.transfer == pd_transfer::storage);
  CHECK(t.instances[2].scheduler.pd.on_failure == handoff_failure_rule::recompute);
  CHECK(t.front.pd.wait_decode_resource_ns == 2'000'000'000);
}

TEST_CASE("cluster config: a storage handoff needs a modelled storage pool",
          "[config][cluster][pd]") {
  auto error_of = [](const std::vector<std::string>& sets) {
    config c;
    c.set(R"(cluster.instances=[{"role": "prefill"}, {"role": "decode"}])");
    c.set("pd.transfer=storage");
    for (const std::string& s : sets)
      c.set(s);
    try {
      resolve_plan(c, {});
    } catch (const config_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of({"storage.capacity_tokens=0"}), Catch::Contains("pd.transfer=storage"));
  CHECK_THAT(error_of({"storage.backend=memory"}), Catch::Contains("storage.backend=model"));
  CHECK(error_of({}) == "no error");
}

TEST_CASE("cluster config: the CUDA backend refuses a prefill/decode deployment",
          "[config][cluster][pd]") {
  config c;
  c.set(R"(cluster.instances=[{"role": "prefill"}, {"role": "decode"}])");
  run_choices on_gpu;
  on_gpu.backend = copy_backend_kind::cuda;
  try {
    resolve_plan(c, on_gpu);
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("prefill/decode deployments"));
  }
}

TEST_CASE("cluster config: output caching needs a storage pool", "[config][cluster]") {
  config c;
  c.set("cache.output_caching=true");
  c.set("storage.capacity_tokens=0");
  CHECK_THROWS_WITH(resolve_plan(c, {}), Catch::Contains("cache.output_caching"));
}
