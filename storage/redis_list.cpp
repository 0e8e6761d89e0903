#include <hiredis/hiredis.h>

#include <string>

#include <absl/container/flat_hash_map.h>

#include "storage/redis_backend.hpp"
#include "storage/redis_dial.hpp"
#include "storage/redis_loop.hpp"

namespace kvtier {

// Listing walks each node with SCAN on its own blocking connection, on a thread of its own: it
// runs when a pool restarts or reconciles, and must not hold up the I/O thread. Only keys of this
// namespace are asked for (MATCH "kvtier:<model>:<dtype>:*"); a node that cannot be reached, or
// stops answering midway, is not `listed`: its blocks are neither lost nor orphans.
void redis_backend::list(list_done done) {
  listers_.start([this, done = std::move(done)] {
    block_listing out;
    out.listed.assign(options_.redis.size(), 0);
    std::string pattern = block_name(options_.ns, 0);
    pattern = pattern.substr(0, pattern.size() - 16) + "*";
    for (size_t n = 0; n < options_.redis.size(); ++n) {
      redisContext* c = redis_dial(options_.redis[n], options_.redis_auth, {2, 0}, {2, 0});
      if (!c)
        continue;
      absl::flat_hash_map<uint64_t, uint8_t> parts;
      std::string cursor = "0";
      bool whole = false;
      for (;;) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "SCAN %s MATCH %s COUNT 1000",
                                                         cursor.c_str(), pattern.c_str()));
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
          if (r)
            freeReplyObject(r);
          break;
        }
        cursor.assign(r->element[0]->str, r->element[0]->len);
        for (size_t i = 0; i < r->element[1]->elements; ++i) {
          std::string key(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
          auto h = hash_of_block_name(options_.ns, key);
          if (!h || key.size() < 2)
            continue;
          std::string tail = key.substr(key.size() - 2);
          parts[*h] |= tail == loop::part_suffix[0] ? 1 : tail == loop::part_suffix[1] ? 2 : 0;
        }
        freeReplyObject(r);
        if (cursor == "0") {
          whole = true;
          break;
        }
      }
      redisFree(c);
      out.listed[n] = whole;
      for (const auto& [h, mask] : parts) {
        if (mask == 3)  // a block counts only with both parts
          out.blocks.push_back(h);
        else if (mask != 0)
          out.partial.push_back(h);
      }
    }
    done(std::move(out));
  });
}

}  // namespace kvtier
