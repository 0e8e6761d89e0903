#pragma once

// What the engine called the blocks that kvtier serve names in its own index (docs/events.md,
// "Block names"): the server chains the engine's hashes once more into names of its own
// (serve/block_names.hpp), but routers look blocks up by the engine's hashes. The server
// remembers each full block's engine hash and tokens when an engine allocates a prompt; the
// event sink turns a copy that turns ready into an event under the engine's hash, and forgets
// the block once no tier holds a ready copy. Blocks the table does not know (a partial last
// block, blocks rebuilt from storage that no engine has asked for since) are not announced.
//
// Written by the server actor's thread and read by the controller's: one mutex.

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/block_hash.hpp"
#include "core/tier.hpp"

namespace kvtier {

struct block_origin {
  block_hash engine_hash = 0;
  std::vector<int32_t> token_ids;  ///< empty: the engine sent hashes only
};

class block_origins {
 public:
  /// Keeps at most `idle_limit` remembered blocks that no tier holds (an allocation whose blocks
  /// never turn ready); the oldest go first.
  explicit block_origins(size_t idle_limit) : idle_limit_(idle_limit) {}

  /// The server named a block `name` (server thread).
  void remember(block_hash name, block_origin origin);
  /// A ready copy of `name` appeared in `where`: its origin, or nullopt if unknown.
  std::optional<block_origin> hold(tier where, block_hash name);
  /// The engine's hash of `name`, if known.
  std::optional<block_hash> engine_hash(block_hash name) const;
  /// The ready copy of `name` in `where` went: its engine hash if that copy was announced.
  std::optional<block_hash> release(tier where, block_hash name);
  /// Every tier was emptied.
  void clear();
  size_t size() const;

 private:
  struct entry {
    block_origin origin;
    uint8_t held = 0;  // a bit per tier with a ready, announced copy
  };
  size_t idle_limit_;
  mutable std::mutex mutex_;
  std::unordered_map<block_hash, entry> entries_;
  std::deque<block_hash> remembered_;  // oldest first; an entry held since is skipped
};

}  // namespace kvtier
