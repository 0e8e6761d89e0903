#include "model/scheduler/recompute_balance.hpp"

namespace kvtier {

std::vector<std::string> recompute_balance_problems(const std::vector<request_record>& records,
                                                    uint64_t recomputed_tokens) {
  constexpr size_t named_max = 5;
  std::vector<std::string> out;
  uint64_t sum = 0;
  size_t unbalanced = 0;
  for (const request_record& q : records) {
    sum += q.recomputed_tokens;
    if (q.finish_ns < 0)
      continue;  // unfinished, rejected or failed: its balance is open
    uint64_t first_hits = 0;
    for (uint64_t t : q.first_hit_tokens)
      first_hits += t;
    uint64_t in = first_hits + q.computed_tokens + q.late_hit_tokens;
    uint64_t owed = uint64_t{q.input_tokens} + q.recomputed_tokens;
    if (in != owed && unbalanced++ < named_max)
      out.push_back("tokens: request " + std::to_string(q.req) + ": first-admission hits "
                    + std::to_string(first_hits) + " + computed " + std::to_string(q.computed_tokens)
                    + " + late hits " + std::to_string(q.late_hit_tokens) + " != prompt "
                    + std::to_string(q.input_tokens) + " + recomputed "
                    + std::to_string(q.recomputed_tokens));
  }
  if (unbalanced > named_max)
    out.push_back("tokens: " + std::to_string(unbalanced - named_max)
                  + " more requests out of balance");
  if (sum != recomputed_tokens)
    out.push_back("tokens: the requests recomputed " + std::to_string(sum)
                  + " tokens, the scheduler counts " + std::to_string(recomputed_tokens));
  return out;
}

}  // namespace kvtier
