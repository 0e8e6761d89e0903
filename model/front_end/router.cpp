#include "model/front_end/router.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

router::router(const router_options& options, size_t instances)
    : options_(options), load_(instances) {
  KVTIER_ASSERT(instances > 0);
}

std::optional<size_t> router::pinned(const trace_request& r) const {
  if (load_.size() == 1)
    return 0;
  if (!options_.session_affinity || r.session == 0)
    return std::nullopt;
  auto it = sessions_.find(r.session);
  if (it == sessions_.end())
    return std::nullopt;
  return it->second;
}

bool router::wants_probe(const trace_request& r) const {
  return options_.policy == route_policy::cache_aware && !pinned(r);
}

double router::cost(size_t i, uint64_t prompt_tokens, const prefix_hit& hit) const {
  uint64_t cached = std::min<uint64_t>(prompt_tokens, hit.device_tokens + hit.host_tokens);
  return static_cast<double>(prompt_tokens - cached)
         + options_.load_weight * static_cast<double>(load_[i].prompt_tokens);
}

size_t router::pick(const trace_request& r, const std::vector<prefix_hit>& hits) {
  if (auto p = pinned(r))
    return *p;
  size_t n = load_.size();
  switch (options_.policy) {
    case route_policy::round_robin:
      return turn_++ % n;
    case route_policy::least_loaded: {
      size_t best = 0;
      for (size_t i = 1; i < n; ++i)
        if (load_[i].requests < load_[best].requests)
          best = i;
      return best;
    }
    case route_policy::cache_aware: {
      KVTIER_ASSERT(hits.size() == n);
      size_t best = 0;
      double best_cost = cost(0, r.input_tokens, hits[0]);
      for (size_t i = 1; i < n; ++i) {
        double c = cost(i, r.input_tokens, hits[i]);
        if (c < best_cost || (c == best_cost && load_[i].requests < load_[best].requests)) {
          best = i;
          best_cost = c;
        }
      }
      return best;
    }
  }
  return 0;
}

void router::pushed(size_t i, const trace_request& r) {
  load_[i].requests += 1;
  load_[i].prompt_tokens += r.input_tokens;
  if (options_.session_affinity && r.session != 0)
    sessions_.emplace(r.session, i);  // the first turn's instance; later turns keep it
}

void router::answered(size_t i, uint32_t prompt_tokens) {
  KVTIER_ASSERT(load_[i].requests > 0 && load_[i].prompt_tokens >= prompt_tokens);
  load_[i].requests -= 1;
  load_[i].prompt_tokens -= prompt_tokens;
}

}  // namespace kvtier
