#include "observe/events/block_origins.hpp"

namespace kvtier {

namespace {

uint8_t bit_of(tier t) {
  return static_cast<uint8_t>(1u << index_of(t));
}

}  // namespace

void block_origins::remember(block_hash name, block_origin origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = entries_.try_emplace(name, entry{std::move(origin), 0});
  if (!fresh)
    return;  // a name fixes its engine hash and tokens (serve/block_names.hpp)
  remembered_.push_back(name);
  while (remembered_.size() > idle_limit_) {
    auto old = entries_.find(remembered_.front());
    if (old != entries_.end() && old->second.held == 0)
      entries_.erase(old);
    remembered_.pop_front();
  }
}

std::optional<block_origin> block_origins::hold(tier where, block_hash name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end())
    return std::nullopt;
  it->second.held |= bit_of(where);
  return it->second.origin;
}

std::optional<block_hash> block_origins::engine_hash(block_hash name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end())
    return std::nullopt;
  return it->second.origin.engine_hash;
}

std::optional<block_hash> block_origins::release(tier where, block_hash name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end() || (it->second.held & bit_of(where)) == 0)
    return std::nullopt;
  block_hash engine = it->second.origin.engine_hash;
  it->second.held &= static_cast<uint8_t>(~bit_of(where));
  if (it->second.held == 0)
    entries_.erase(it);
  return engine;
}

void block_origins::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  remembered_.clear();
}

size_t block_origins::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace kvtier
