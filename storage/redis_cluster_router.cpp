#include "storage/redis_cluster_router.hpp"

#include <hiredis/sds.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace kvtier {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

constexpr int64_t ms = 1'000'000;
// Between attempts while the cluster settles (a failover takes its node timeout and an election).
constexpr int64_t settle_pause_ns = 100 * ms;
// After a run gave up, runs in this window try once: a cluster that stays down does not hold
// every batch for the whole failover wait.
constexpr int64_t gave_up_window_ns = 1'000 * ms;
// Bytes a connection's output buffer gathers before it is written (hiredis copies each command
// into it: a batch of megabyte values is written as it is built, not held whole).
constexpr size_t flush_bytes = 4u << 20;

bool unsettled(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ERROR || !r->str)
    return false;
  std::string text(r->str, r->len);
  for (const char* word : {"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN"})
    if (text.rfind(word, 0) == 0)
      return true;
  return false;
}

bool flush(redisContext* c) {
  int done = 0;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK)
      return false;
  return true;
}

}  // namespace

redis_cluster_router::redis_cluster_router(std::vector<std::string> seeds,
                                           int64_t failover_wait_ns, redis_access access)
  : failover_wait_ns_(failover_wait_ns), pool_(std::move(access)), known_(std::move(seeds)) {}

std::vector<std::string> redis_cluster_router::known_nodes() const {
  std::lock_guard<std::mutex> guard(known_mutex_);
  return known_;
}

bool redis_cluster_router::refresh() {
  refreshed_at_ = now_ns();
  std::vector<std::string> ask = masters();
  for (const std::string& a : known_nodes())
    if (std::find(ask.begin(), ask.end(), a) == ask.end())
      ask.push_back(a);
  std::optional<slot_map> partial;
  for (const std::string& address : ask) {
    redis_reply_ptr r = pool_.command(address, "CLUSTER SLOTS");
    std::vector<std::string> named = known_nodes();
    auto map = parse_cluster_slots(r.get(), address.substr(0, address.rfind(':')), &named);
    if (!map)
      continue;
    {
      std::lock_guard<std::mutex> guard(known_mutex_);
      known_ = std::move(named);
    }
    if (map->complete()) {
      map_ = std::move(*map);
      return true;
    }
    if (!partial)
      partial = std::move(map);
  }
  if (partial)
    map_ = std::move(*partial);
  return false;
}

bool redis_cluster_router::down_master_owns_slots() const {
  for (const std::string& m : map_.masters())
    if (std::find(down_.begin(), down_.end(), m) != down_.end())
      return true;
  return false;
}

void redis_cluster_router::note_down(const std::string& address) {
  pool_.drop(address);
  serving = false;
  if (std::find(down_.begin(), down_.end(), address) == down_.end()) {
    down_.push_back(address);
    ++node_downs;
  }
}

std::vector<redis_reply_ptr> redis_cluster_router::run(
  const std::vector<cluster_command>& commands) {
  std::vector<redis_reply_ptr> replies(commands.size());
  int64_t start = now_ns();
  int64_t deadline = start - gave_up_at_ < gave_up_window_ns ? start : start + failover_wait_ns_;
  if (!serving && start - refreshed_at_ > settle_pause_ns)
    refresh();
  routed r;
  r.where.resize(commands.size());
  r.asking.assign(commands.size(), 0);
  std::vector<size_t> todo(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    todo[i] = i;
    r.where[i] = map_.owner(key_slot(commands[i].key));
  }
  for (;;) {
    std::map<std::string, std::vector<size_t>> by_node;
    for (size_t i : todo)
      by_node[r.where[i]].push_back(i);
    r.again.clear();
    r.trouble = false;
    for (const auto& [address, which] : by_node)
      exchange(address, which, commands, r, replies);
    if (r.again.empty()) {
      // Served again only once no master found down still owns slots: until its failover, its
      // blocks are not lost, only out of reach (a listing would miss them).
      if (!serving && !commands.empty() && !down_master_owns_slots()) {
        serving = true;
        down_.clear();
        ++recoveries;
      }
      return replies;
    }
    if (now_ns() >= deadline) {
      gave_up_at_ = now_ns();
      return replies;
    }
    if (r.trouble) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(settle_pause_ns));
      refresh();
      for (size_t i : r.again)
        if (!r.asking[i])
          r.where[i] = map_.owner(key_slot(commands[i].key));
    }
    todo = r.again;
  }
}

// Sends one node its commands (ASKING before those redirected by ASK) and reads every reply.
void redis_cluster_router::exchange(const std::string& address, const std::vector<size_t>& which,
                                    const std::vector<cluster_command>& commands, routed& r,
                                    std::vector<redis_reply_ptr>& replies) {
  redisContext* c = address.empty() ? nullptr : pool_.connection(address);
  if (!c || !send(c, which, commands, r)) {
    if (!address.empty())
      note_down(address);
    r.again.insert(r.again.end(), which.begin(), which.end());
    r.trouble = true;
    return;
  }
  for (size_t k = 0; k < which.size(); ++k) {
    size_t i = which[k];
    void* asking_reply = nullptr;
    void* reply = nullptr;
    if ((r.asking[i] && redisGetReply(c, &asking_reply) != REDIS_OK) ||
        redisGetReply(c, &reply) != REDIS_OK) {
      if (asking_reply)
        freeReplyObject(asking_reply);
      note_down(address);
      r.again.insert(r.again.end(), which.begin() + static_cast<long>(k), which.end());
      r.trouble = true;
      return;
    }
    if (asking_reply)
      freeReplyObject(asking_reply);
    settle(i, redis_reply_ptr(static_cast<redisReply*>(reply)), r, replies);
  }
  // It answered: a node found down before is back (restarted, its blocks perhaps gone).
  down_.erase(std::remove(down_.begin(), down_.end(), address), down_.end());
}

bool redis_cluster_router::send(redisContext* c, const std::vector<size_t>& which,
                                const std::vector<cluster_command>& commands, const routed& r) {
  for (size_t i : which) {
    const cluster_command& cmd = commands[i];
    if (r.asking[i])
      redisAppendCommand(c, "ASKING");
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (size_t w = 0; w <= cmd.words.size(); ++w) {
      if (cmd.payload && w == cmd.payload_at) {
        argv.push_back(reinterpret_cast<const char*>(cmd.payload));
        len.push_back(cmd.payload_len);
      }
      if (w < cmd.words.size()) {
        argv.push_back(cmd.words[w].c_str());
        len.push_back(cmd.words[w].size());
      }
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), len.data()) !=
        REDIS_OK)
      return false;
    if (sdslen(c->obuf) >= flush_bytes && !flush(c))
      return false;
  }
  return flush(c);
}

void redis_cluster_router::settle(size_t i, redis_reply_ptr reply, routed& r,
                                  std::vector<redis_reply_ptr>& replies) {
  if (auto redirect = parse_redirect(reply.get())) {
    r.where[i] = redirect->address;
    r.asking[i] = redirect->what == cluster_redirect::kind::ask;
    if (redirect->what == cluster_redirect::kind::moved) {
      map_.assign(redirect->slot, redirect->slot, redirect->address);
      ++moved;
    } else {
      ++asked;
    }
    r.again.push_back(i);
    return;
  }
  if (unsettled(reply.get())) {
    r.again.push_back(i);
    r.trouble = true;
    return;
  }
  r.asking[i] = 0;
  replies[i] = std::move(reply);
}

}  // namespace kvtier
