#include "serve/server/engine_directory.hpp"

#include "core/check.hpp"

namespace kvtier::serve {

engine_directory::engine_directory(uint32_t stacks) : stacks_(stacks) {
  KVTIER_ASSERT(stacks > 0);
}

uint32_t engine_directory::place(uint64_t conn, const std::string& name) {
  std::lock_guard<std::mutex> guard(mutex_);
  conn_use& c = conns_[conn];
  if (c.engines == 0) {
    uint32_t best = 0;
    bool restarted = false;
    for (uint32_t k = 0; k < stacks_.size() && !restarted; ++k) {
      if (stacks_[k].engines == 0 && !name.empty() && stacks_[k].last_engine == name) {
        best = k;
        restarted = true;
      } else if (stacks_[k].engines < stacks_[best].engines) {
        best = k;
      }
    }
    c.stack = best;
  }
  ++c.engines;
  ++stacks_[c.stack].engines;
  return c.stack;
}

uint32_t engine_directory::join(uint32_t stack, uint64_t conn) {
  std::lock_guard<std::mutex> guard(mutex_);
  KVTIER_ASSERT(stack < stacks_.size());
  conn_use& c = conns_[conn];
  // The socket thread routes a placed connection's calls to one shard: its engines' stack.
  KVTIER_ASSERT(c.engines == 0 || c.stack == stack);
  c.stack = stack;
  ++c.engines;
  ++stacks_[stack].engines;
  return stack;
}

void engine_directory::release(uint32_t stack, uint64_t conn) {
  auto it = conns_.find(conn);
  KVTIER_ASSERT(it != conns_.end() && it->second.engines > 0 && it->second.stack == stack);
  KVTIER_ASSERT(stacks_.at(stack).engines > 0);
  --stacks_[stack].engines;
  if (--it->second.engines == 0)
    conns_.erase(it);
}

void engine_directory::cancel(uint32_t stack, uint64_t conn) {
  std::lock_guard<std::mutex> guard(mutex_);
  release(stack, conn);
}

void engine_directory::leave(uint32_t stack, uint64_t conn, const std::string& name) {
  std::lock_guard<std::mutex> guard(mutex_);
  release(stack, conn);
  stacks_[stack].last_engine = name;
}

uint32_t engine_directory::engines_on(uint32_t stack) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stacks_.at(stack).engines;
}

}  // namespace kvtier::serve
