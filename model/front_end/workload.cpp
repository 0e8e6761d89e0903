#include "model/front_end/workload.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

workload::workload(feed next, double time_scale)
    : next_(std::move(next)), time_scale_(time_scale) {
  // nop
}

int64_t workload::scaled(int64_t recorded_ns) const {
  return time_scaled(recorded_ns, time_scale_);
}

bool workload::predecessor_of(const trace_request& r, turn_key& key) {
  if (!r.follows_previous)
    return false;
  if (r.turn > 0)
    key = {r.session, r.turn - 1};
  else
    key = {r.parent_session, r.parent_turn};
  return true;
}

void workload::place(trace_request r) {
  uint64_t order = read_++;
  turn_key key;
  if (!predecessor_of(r, key)) {
    ++independent_due_;
    int64_t at = scaled(r.arrival_ns);
    due_.push({at, order, true, std::move(r)});
    return;
  }
  auto done = finished_at_.find(key);
  if (done != finished_at_.end()) {
    int64_t at = time_add(done->second, scaled(r.think_ns));
    due_.push({at, order, false, std::move(r)});
    return;
  }
  parked_.emplace(key, std::move(r));
}

bool workload::read_one(bool& follows, turn_key& key) {
  if (ended_)
    return false;
  trace_request r;
  if (!next_(r)) {
    ended_ = true;
    return false;
  }
  ++requests_read_;
  follows = predecessor_of(r, key);
  place(std::move(r));
  return true;
}

int64_t workload::next_arrival() {
  // An independent request that is still unread could come before anything buffered, so keep one
  // buffered (followers met on the way are parked or scheduled).
  bool follows;
  turn_key key;
  while (independent_due_ == 0 && read_one(follows, key)) {
  }
  return due_.empty() ? never : due_.top().at;
}

void workload::take_due(int64_t now, std::vector<trace_request>& out) {
  while (next_arrival() <= now) {
    due_item item = due_.top();
    due_.pop();
    if (item.independent)
      --independent_due_;
    // A follower read after its time had passed (its predecessor finished before the stream got
    // to it) arrives when it is found, never in the past.
    item.req.arrival_ns = std::max(item.at, taken_until_);
    out.push_back(std::move(item.req));
  }
  taken_until_ = std::max(taken_until_, now);
}

void workload::finished(uint64_t session, uint32_t turn, int64_t at) {
  if (session == 0)
    return;
  turn_key key{session, turn};
  KVTIER_ASSERT(finished_at_.find(key) == finished_at_.end());
  finished_at_[key] = at;
  auto [begin, end] = parked_.equal_range(key);
  bool released = begin != end;
  for (auto it = begin; it != end; ++it) {
    trace_request f = std::move(it->second);
    int64_t when = time_add(at, scaled(f.think_ns));
    due_.push({when, read_++, false, std::move(f)});
  }
  parked_.erase(begin, end);
  // Its follower may be unread yet: read ahead until one turns up (it is scheduled as it is read)
  // or the trace ends.
  bool follows = false;
  turn_key pred;
  while (!released && read_one(follows, pred))
    released = follows && pred == key;
}

bool workload::exhausted() const {
  return ended_ && due_.empty() && parked_.empty();
}

}  // namespace kvtier
