// cluster.instances: groups, counts, overrides, and errors that name the item and field.

#include <catch2/catch.hpp>

#include "sim/config/cluster_config.hpp"
#include "sim/config/replay_config.hpp"
#include "sim/full/timed_config.hpp"

using namespace kvtier;

TEST_CASE("cluster config: the default is one mixed instance", "[config][cluster]") {
  config c;
  auto specs = resolve_cluster(c);
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].name == "mixed-0");
  CHECK(single_instance(c));
  timed_config t = resolve_timed(c, resolve(c));
  CHECK(t.instances.empty());  // the template is the one instance
}

TEST_CASE("cluster config: groups expand by count and apply their overrides", "[config][cluster]") {
  config c;
  c.set(R"(cluster.instances=[{"role": "mixed", "count": 2},
        {"role": "mixed", "overrides": {"cache": {"device_blocks": 100}, "scheduler.max_num_seqs": 3}}])");
  c.set("router.policy=cache_aware");
  CHECK_FALSE(single_instance(c));
  timed_config t = resolve_timed(c, resolve(c));
  REQUIRE(t.instances.size() == 3);
  CHECK(t.instances[0].name == "mixed-0");
  CHECK(t.instances[2].name == "mixed-2");
  CHECK(t.instances[0].cache.device_blocks == t.cache.device_blocks);
  CHECK(t.instances[2].cache.device_blocks == 100);
  CHECK(t.instances[2].scheduler.device_blocks == 100);
  CHECK(t.instances[2].scheduler.options.max_num_seqs == 3);
  CHECK(t.instances[1].scheduler.options.max_num_seqs == t.scheduler.options.max_num_seqs);
  CHECK(t.router.policy == route_policy::cache_aware);
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
  CHECK_THAT(error_of(R"([{"role": "prefill"}, {"role": "decode"}])"),
             Catch::Contains("pd.transfer"));
  config bad;
  CHECK_THROWS_AS(bad.set("cluster.instances=5"), config_error);
}
