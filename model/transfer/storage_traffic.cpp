#include "model/transfer/storage_traffic.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/check.hpp"

namespace kvtier {

std::string storage_failure::message() const {
  switch (fault) {
    case storage_fault::none: return "";
    case storage_fault::get_failed: return "storage get failed: " + detail;
    case storage_fault::put_failed: return "storage put failed: " + detail;
    case storage_fault::payload_mismatch: return detail;
  }
  return detail;
}

storage_traffic::storage_traffic(uint64_t payload_bytes, uint64_t inflight_bound)
    : each_(payload_bytes), bound_(inflight_bound) {}

storage_traffic::entry& storage_traffic::at(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    std::fprintf(stderr, "kvtier: internal error: storage transfer %llu is not in flight\n",
                 static_cast<unsigned long long>(id));
    std::abort();
  }
  return it->second;
}

void storage_traffic::enqueue(uint64_t id, transfer_kind kind, size_t blocks) {
  KVTIER_ASSERT((kind == transfer_kind::load || kind == transfer_kind::store) && blocks > 0);
  entry e;
  e.kind = kind;
  e.blocks = blocks;
  bool fresh = entries_.emplace(id, std::move(e)).second;
  KVTIER_ASSERT(fresh);
  queue_.push_back(id);
}

size_t storage_traffic::room_for(size_t blocks) const {
  if (each_ == 0 || bound_ == 0)
    return blocks;
  uint64_t room = bound_ > inflight_ ? bound_ - inflight_ : 0;
  size_t fits = std::min<size_t>(blocks, room / each_);
  return fits == 0 && inflight_ == 0 ? 1 : fits;
}

void storage_traffic::hold(uint64_t bytes) {
  inflight_ += bytes;
  counts_.inflight_peak_bytes = std::max(counts_.inflight_peak_bytes, inflight_);
}

std::vector<storage_grant> storage_traffic::pump(int64_t now_ns) {
  std::vector<storage_grant> out;
  while (!queue_.empty()) {
    uint64_t id = queue_.front();
    entry& e = at(id);
    bool load = e.kind == transfer_kind::load;
    size_t left = e.blocks - e.released;
    size_t take = room_for(left);
    if (load && take < left && inflight_ > 0)
      take = 0;  // a load's buffers are taken at once
    if (take == 0) {
      if (e.waiting_since < 0) {
        e.waiting_since = now_ns;
        ++counts_.waits;
      }
      return out;
    }
    if (e.waiting_since >= 0) {
      counts_.wait_ns += now_ns - e.waiting_since;
      e.waiting_since = -1;
    }
    if (load) {
      queue_.pop_front();
      e.released = e.blocks;
      e.load_bytes = e.blocks * each_;
      hold(e.load_bytes);
      out.push_back({id, e.kind, 0, e.blocks});
      continue;
    }
    size_t from = e.released;
    e.released += take;
    if (e.released == e.blocks)
      queue_.pop_front();
    hold(take * each_);
    ++e.puts_out;
    out.push_back({id, e.kind, from, take});
  }
  return out;
}

void storage_traffic::begin_parts(uint64_t id) {
  entry& e = at(id);
  KVTIER_ASSERT(!e.begun && e.released > 0);
  e.begun = true;
}

bool storage_traffic::put_answered(uint64_t id, size_t blocks, storage_failure f) {
  entry& e = at(id);
  KVTIER_ASSERT(e.kind == transfer_kind::store && e.puts_out > 0);
  inflight_ -= blocks * each_;
  --e.puts_out;
  fail(id, std::move(f));
  return e.puts_out == 0 && e.released == e.blocks;
}

void storage_traffic::fail(uint64_t id, storage_failure f) {
  entry& e = at(id);
  if (f.failed() && !e.failure.failed())
    e.failure = std::move(f);
}

std::optional<storage_failure> storage_traffic::end_part(uint64_t id, storage_part p) {
  entry& e = at(id);
  bool& ended = p == storage_part::answer ? e.answer_ended : e.flow_ended;
  if (!e.begun || ended) {
    std::fprintf(stderr, "kvtier: internal error: storage transfer %llu: its %s ended %s\n",
                 static_cast<unsigned long long>(id),
                 p == storage_part::answer ? "storage answer" : "network flow",
                 e.begun ? "twice" : "before it began");
    std::abort();
  }
  ended = true;
  if (!e.answer_ended || !e.flow_ended)
    return std::nullopt;
  return e.failure;
}

bool storage_traffic::forget(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end())
    return false;
  KVTIER_ASSERT(it->second.released == it->second.blocks && it->second.puts_out == 0);
  uint64_t freed = it->second.load_bytes;
  inflight_ -= freed;
  entries_.erase(it);
  return freed > 0;
}

}  // namespace kvtier
