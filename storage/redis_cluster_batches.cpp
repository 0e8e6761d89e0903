#include <cstring>

#include "storage/redis_cluster_backend.hpp"
#include "storage/redis_cluster_router.hpp"

// The redis_cluster backend's batches as cluster commands, and their replies settled
// (redis_cluster_backend.hpp).

namespace kvtier {

namespace {

// One command per block: `verb` over both of its parts (one slot: their hash tag).
std::vector<cluster_command> both_parts(const block_namespace& ns,
                                        const std::vector<block_ref>& blocks, const char* verb) {
  std::vector<cluster_command> out;
  out.reserve(blocks.size());
  for (const block_ref& b : blocks) {
    std::string k = redis_cluster_backend::part_key(ns, b.hash, 0);
    std::string v = redis_cluster_backend::part_key(ns, b.hash, 1);
    out.push_back({k, {verb, k, v}});
  }
  return out;
}

}  // namespace

void redis_cluster_backend::run_exists(job& j) {
  auto replies = router_->run(both_parts(options_.ns, j.blocks, "EXISTS"));
  std::vector<bool> present(j.blocks.size());
  for (size_t i = 0; i < present.size(); ++i)
    present[i] = replies[i] && replies[i]->type == REDIS_REPLY_INTEGER && replies[i]->integer == 2;
  j.on_exists(std::move(present));
}

void redis_cluster_backend::run_get(job& j) {
  auto replies = router_->run(both_parts(options_.ns, j.blocks, "MGET"));
  std::vector<bool> found(j.blocks.size());
  uint64_t hit = 0, bytes = 0, corrupt = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    const redisReply* r = replies[i].get();
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
      continue;
    const redisReply* k = r->element[0];
    const redisReply* v = r->element[1];
    if (k->len + v->len != j.into[i].size) {
      ++corrupt;  // another length than the block's: never handed out as its bytes
      continue;
    }
    std::memcpy(j.into[i].data, k->str, k->len);
    std::memcpy(j.into[i].data + k->len, v->str, v->len);
    found[i] = true;
    ++hit;
    bytes += j.into[i].size;
  }
  {
    std::lock_guard<std::mutex> guard(counters_mutex_);
    counters_.gets_hit += hit;
    counters_.gets_missed += found.size() - hit;
    counters_.bytes_read += bytes;
    counters_.corrupt += corrupt;
  }
  j.on_get(std::move(found));
}

void redis_cluster_backend::run_put(job& j) {
  std::vector<cluster_command> sets;
  std::string ttl = std::to_string(options_.redis_ttl_s);
  for (size_t i = 0; i < j.blocks.size(); ++i) {
    const block_bytes_t& p = j.payloads[i];
    size_t half = p.size() / 2;
    for (int part = 0; part < 2; ++part) {
      cluster_command c;
      c.key = part_key(options_.ns, j.blocks[i].hash, part);
      c.words = {"SET", c.key};
      if (options_.redis_ttl_s > 0)
        c.words.insert(c.words.end(), {"EX", ttl});
      c.payload = p.data() + (part ? half : 0);
      c.payload_len = part ? p.size() - half : half;
      c.payload_at = 2;
      sets.push_back(std::move(c));
    }
  }
  auto replies = router_->run(sets);
  std::vector<bool> stored(j.blocks.size());
  std::vector<cluster_command> rollback;
  std::string first_error;
  uint64_t ok = 0, bytes = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    bool k = replies[2 * i] && replies[2 * i]->type == REDIS_REPLY_STATUS;
    bool v = replies[2 * i + 1] && replies[2 * i + 1]->type == REDIS_REPLY_STATUS;
    stored[i] = k && v;
    ok += stored[i];
    bytes += stored[i] ? j.payloads[i].size() : 0;
    if (k != v)  // one part landed: take it back, so the block is absent, not half there
      rollback.push_back({sets[2 * i + (k ? 0 : 1)].key, {"DEL", sets[2 * i + (k ? 0 : 1)].key}});
    for (size_t part = 2 * i; part < 2 * i + 2 && first_error.empty(); ++part) {
      const redisReply* r = replies[part].get();
      if (!r)
        first_error = "redis cluster: no node served the block's slot in time";
      else if (r->type == REDIS_REPLY_ERROR && r->str)
        first_error = "redis cluster: " + std::string(r->str, r->len);
    }
  }
  if (!rollback.empty())
    router_->run(rollback);
  {
    std::lock_guard<std::mutex> guard(counters_mutex_);
    counters_.puts_ok += ok;
    counters_.puts_failed += stored.size() - ok;
    counters_.bytes_written += bytes;
    counters_.rollbacks += rollback.size();
    if (counters_.put_error.empty())
      counters_.put_error = first_error;
  }
  j.payloads.clear();
  j.on_put(std::move(stored));
}

// A block whose DEL got no answer in time (its master down past the failover wait) is reported
// not gone: the pool retries it, or its next reconcile finds the block.
void redis_cluster_backend::run_remove(job& j) {
  auto replies = router_->run(both_parts(options_.ns, j.blocks, "DEL"));
  uint64_t removed = 0;
  std::vector<bool> gone(j.blocks.size());
  for (size_t i = 0; i < replies.size(); ++i) {
    const redisReply* r = replies[i].get();
    gone[i] = r && r->type == REDIS_REPLY_INTEGER;
    removed += gone[i] && r->integer > 0;
  }
  {
    std::lock_guard<std::mutex> guard(counters_mutex_);
    counters_.removed += removed;
  }
  j.on_remove(std::move(gone));
}

}  // namespace kvtier
