#include "sim/report/tier_occupancy.hpp"

#include <algorithm>

namespace kvtier {

void tier_occupancy_sampler::start(std::function<int64_t()> now) {
  std::lock_guard<std::mutex> g(lock_);
  now_ = std::move(now);
}

void tier_occupancy_sampler::stop() {
  std::lock_guard<std::mutex> g(lock_);
  catch_up();
  now_ = nullptr;
}

void tier_occupancy_sampler::catch_up() {
  if (!now_)
    return;
  int64_t now = now_();
  size_t second = now < 0 ? 0 : static_cast<size_t>(now / 1'000'000'000);
  while (at_start_.size() <= second)
    at_start_.push_back(count_);
}

void tier_occupancy_sampler::stored(tier where, block_hash, std::optional<block_hash>,
                                    uint32_t) {
  std::lock_guard<std::mutex> g(lock_);
  if (!now_)
    return;
  catch_up();
  ++at(count_, where);
}

void tier_occupancy_sampler::removed(tier where, block_hash) {
  std::lock_guard<std::mutex> g(lock_);
  if (!now_)
    return;
  catch_up();
  --at(count_, where);
}

void tier_occupancy_sampler::cleared() {
  std::lock_guard<std::mutex> g(lock_);
  if (!now_)
    return;
  catch_up();
  count_ = {};
}

std::vector<per_tier<int64_t>> tier_occupancy_sampler::per_second(size_t seconds) const {
  std::lock_guard<std::mutex> g(lock_);
  std::vector<per_tier<int64_t>> out(at_start_.begin(),
                                     at_start_.begin()
                                       + static_cast<long>(std::min(seconds, at_start_.size())));
  out.resize(seconds, count_);
  return out;
}

}  // namespace kvtier
