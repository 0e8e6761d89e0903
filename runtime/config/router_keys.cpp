#include "runtime/config/router_keys.hpp"

namespace kvtier {

std::vector<option_spec> router_key_specs() {
  return {
    {keys::router::policy, 0, 0, {"round_robin", "least_loaded", "cache_aware"},
     false,
     "which instance a request goes to: in turn, the fewest requests in flight, or the best "
     "prefix hit against queued work (docs/cluster.md gives the score)"},
    {keys::router::session_affinity, 0, 0, {}, false,
     "keep every turn of a session (agentic, multi-turn) on the instance of its first turn"},
    {keys::router::load_weight, 0, 1e6, {}, false,
     "cache_aware: what one prompt token in flight on an instance costs against one uncached "
     "token of the request"},
  };
}

}  // namespace kvtier
