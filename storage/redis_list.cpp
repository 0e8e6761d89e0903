#include <hiredis/hiredis.h>

#include <string>

#include <absl/container/flat_hash_map.h>

#include "storage/redis_backend.hpp"
#include "storage/redis_loop.hpp"

namespace kvtier {

// Listing walks each node with SCAN on its own blocking connection, on a thread of its own: it
// runs once, when a pool restarts, and must not hold up the I/O thread.
void redis_backend::list(list_done done) {
  listers_.emplace_back([this, done = std::move(done)] {
    std::vector<uint64_t> out;
    std::string pattern = block_name(options_.ns, 0);
    pattern = pattern.substr(0, pattern.size() - 16) + "*";
    for (const std::string& address : options_.redis) {
      auto [host, port] = parse_redis_address(address);
      timeval tv{2, 0};
      redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
      if (!c || c->err) {
        if (c)
          redisFree(c);
        continue;  // a node that is down lists nothing: its blocks count as gone
      }
      redisSetTimeout(c, tv);
      absl::flat_hash_map<uint64_t, uint8_t> parts;
      std::string cursor = "0";
      do {
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
      } while (cursor != "0");
      redisFree(c);
      for (const auto& [h, mask] : parts)
        if (mask == 3)  // a block counts only with both parts
          out.push_back(h);
    }
    done(std::move(out));
  });
}

}  // namespace kvtier
