#pragma once

// The device allocator of an engine that owns its GPU tier (docs/protocol.md, version 3), as
// `kvtier engine-sim --device-owner engine` runs it in place of a real engine's KV cache manager:
// a block per `block_size` tokens of a request, prompt blocks shared by prefix (a cached
// block is found again by its chain of hashes, as vLLM's prefix cache finds it), released
// blocks kept cached until their ids are needed (least recently released first). Like vLLM's
// block pool emitting BlockRemoved, it tells which blocks' contents went (take_evicted).

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/block_hash.hpp"
#include "model/messages/ids.hpp"

namespace kvtier::serve {

class engine_block_allocator {
 public:
  engine_block_allocator(uint32_t capacity, uint32_t block_size);

  /// Takes the table of a request admitted for `tokens` tokens of `prompt`; none (and nothing
  /// taken) when too few blocks are free or cached.
  std::optional<std::vector<uint32_t>> admit(request_id req,
                                             const std::vector<cache_block>& prompt,
                                             uint32_t tokens);
  /// The new blocks a running request needs to cover `tokens`; none when too few are left.
  std::optional<std::vector<uint32_t>> grow(request_id req, uint32_t tokens);
  /// Gives back the last `count` blocks of a request's table (a growth the server refused).
  void shrink(request_id req, size_t count);
  /// Releases every block of the request (finished, preempted).
  void release(request_id req);
  /// An admission the server refused: its fresh blocks were never computed, so they go back
  /// free, not cached; its shared ones drop a reference.
  void refuse(request_id req);
  const std::vector<uint32_t>& table(request_id req) const;
  /// The blocks whose contents went since the last call (a cached block evicted for a fresh
  /// one, a released block nobody caches): the step's `evicted` (docs/protocol.md, version 3).
  std::vector<uint32_t> take_evicted();

 private:
  struct block {
    uint32_t refs = 0;
    std::optional<uint64_t> key;  // the prefix chain's key of a prompt block
    std::list<uint32_t>::iterator cached;  // in lru_ while refs == 0 and keyed
  };
  std::optional<uint32_t> take_fresh();
  /// A failed admission: drops its first `shared` blocks' references, frees the others.
  void undo_admit(request_id req, size_t shared);
  void drop_ref(uint32_t id);

  uint32_t block_size_;
  std::vector<block> blocks_;
  std::vector<uint32_t> free_;
  std::list<uint32_t> lru_;  // cached blocks nobody holds, least recently released first
  std::unordered_map<uint64_t, uint32_t> by_key_;
  std::unordered_map<request_id, std::vector<uint32_t>> tables_;
  std::vector<uint32_t> evicted_;
  std::unordered_map<request_id, size_t> shared_;  // admitted: blocks found cached
};

}  // namespace kvtier::serve
