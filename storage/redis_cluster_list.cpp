#include <absl/container/flat_hash_map.h>

#include "storage/redis_cluster_backend.hpp"
#include "storage/redis_cluster_router.hpp"

namespace kvtier {

// Listing walks every master with SCAN, on a thread and connections of its own (it runs when a
// pool restarts or after a failover, and must not hold up the I/O thread), asking only for this
// namespace's keys ("{kvtier:<model>:<dtype>:*"). The cluster's blocks are not placed by the
// pool's nodes, so a listing is whole or not at all: a slot map with slots unserved, or a master
// that does not answer to the end, makes it incomplete (no node `listed`), and the pool neither
// drops nor deletes anything on its word.
void redis_cluster_backend::list(list_done done) {
  std::vector<std::string> seeds = router_->known_nodes();
  listers_.start([this, seeds = std::move(seeds), done = std::move(done)] {
    redis_cluster_router lister(seeds, 0, options_.redis_auth);
    bool whole = lister.refresh();
    std::string pattern = "{" + block_name(options_.ns, 0);
    pattern = pattern.substr(0, pattern.size() - 16) + "*";
    absl::flat_hash_map<uint64_t, uint8_t> parts;
    for (const std::string& master : lister.masters()) {
      std::string cursor = "0";
      do {
        redis_reply_ptr r = lister.pool().command(master, "SCAN %s MATCH %s COUNT 1000",
                                                  cursor.c_str(), pattern.c_str());
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
          whole = false;
          break;
        }
        cursor.assign(r->element[0]->str, r->element[0]->len);
        for (size_t i = 0; i < r->element[1]->elements; ++i) {
          const redisReply* k = r->element[1]->element[i];
          int part = 0;
          if (auto h = hash_of_part_key(options_.ns, std::string(k->str, k->len), &part))
            parts[*h] |= static_cast<uint8_t>(1u << part);
        }
      } while (cursor != "0");
    }
    block_listing out;
    out.listed.assign(nodes(), whole ? 1 : 0);
    for (const auto& [h, mask] : parts) {
      if (mask == 3)  // a block counts only with both parts
        out.blocks.push_back(h);
      else
        out.partial.push_back(h);
    }
    done(std::move(out));
  });
}

}  // namespace kvtier
