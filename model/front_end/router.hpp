#pragma once

// Which instance a request goes to.
//
//   round_robin   in turn
//   least_loaded  the fewest requests in flight (pushed and not yet answered)
//   cache_aware   the least estimated work, as Mooncake's conductor and SGLang's router weigh
//                 prefix reuse against load:
//                   cost(i) = uncached_tokens(i) + load_weight * prompt_tokens_in_flight(i)
//                 where uncached_tokens(i) is the prompt minus the prefix instance i holds in
//                 device or host memory (a probe of its index that takes nothing); the prompt
//                 tokens in flight stand for its queue. Ties go to fewer requests in flight,
//                 then to the lower index.
//
// With session affinity, every later turn of a session goes where its first turn went, whatever
// the policy (its KV is most likely there).

#include <cstdint>
#include <optional>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "model/messages.hpp"

namespace kvtier {

enum class route_policy { round_robin, least_loaded, cache_aware };

struct router_options {
  route_policy policy = route_policy::round_robin;
  bool session_affinity = true;
  double load_weight = 1;
};

class router {
 public:
  router(const router_options& options, size_t instances);

  /// The instance `r` must go to regardless of load (its session's), if any.
  std::optional<size_t> pinned(const trace_request& r) const;
  /// Whether pick() needs each instance's prefix hit for `r`.
  bool wants_probe(const trace_request& r) const;
  /// Chooses the instance for `r`; `hits` has one entry per instance when wants_probe(r).
  size_t pick(const trace_request& r, const std::vector<prefix_hit>& hits);

  /// `r` went to / came back from instance `i`.
  void pushed(size_t i, const trace_request& r);
  void answered(size_t i, uint32_t prompt_tokens);

  /// The cache_aware cost of instance `i` for a prompt of `prompt_tokens` (see above).
  double cost(size_t i, uint64_t prompt_tokens, const prefix_hit& hit) const;
  uint64_t in_flight(size_t i) const { return load_[i].requests; }

 private:
  struct load {
    uint64_t requests = 0;
    uint64_t prompt_tokens = 0;
  };
  router_options options_;
  std::vector<load> load_;
  uint64_t turn_ = 0;
  absl::flat_hash_map<uint64_t, size_t> sessions_;  // session -> instance of its first turn
};

}  // namespace kvtier
