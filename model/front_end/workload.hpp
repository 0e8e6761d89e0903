#pragma once

// When requests arrive. A request that depends on no other arrives at its recorded time. A turn
// of a session (agentic traces, native traces with sessions) arrives `think` after the turn it
// follows *finished in this replay*, which is what makes a faster or slower cache change the
// offered load as it would in production; a sub-agent's first turn follows the parent turn it
// was spawned after.
//
// The trace streams in recorded order. Followers are parked until what they follow finishes;
// when a session turn finishes before its follower was read, the stream is read ahead (buffering
// independent requests by their recorded times) until the follower turns up or the trace ends.

#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include "core/trace_request.hpp"

namespace kvtier {

class workload {
 public:
  static constexpr int64_t never = INT64_MAX;
  using feed = std::function<bool(trace_request&)>;

  /// `time_scale` stretches the recorded arrival and think times.
  explicit workload(feed next, double time_scale = 1);

  /// The earliest arrival known now (never when nothing more will arrive until something
  /// finishes, or ever).
  int64_t next_arrival();
  /// Appends every request due at or before `now`, by arrival time (ties: trace order), setting
  /// arrival_ns to the time it actually arrives.
  void take_due(int64_t now, std::vector<trace_request>& out);
  /// `r` finished at `at`: whatever follows it becomes due.
  void finished(const trace_request& r, int64_t at) { finished(r.session, r.turn, at); }
  /// Turn `turn` of `session` (0: none) finished at `at`.
  void finished(uint64_t session, uint32_t turn, int64_t at);
  /// The trace is read to the end and nothing is parked or due.
  bool exhausted() const;
  uint64_t parked() const { return parked_.size(); }
  /// Requests read from the feed so far.
  uint64_t read() const { return requests_read_; }

 private:
  using turn_key = std::pair<uint64_t, uint32_t>;  // (session, turn)
  struct due_item {
    int64_t at;
    uint64_t order;  // trace order, for ties
    bool independent;
    trace_request req;
  };
  struct later {
    bool operator()(const due_item& a, const due_item& b) const {
      return a.at != b.at ? a.at > b.at : a.order > b.order;
    }
  };
  /// Reads and places one request; returns the predecessor it follows (or none) via `key`.
  bool read_one(bool& follows, turn_key& key);
  void place(trace_request r);
  static bool predecessor_of(const trace_request& r, turn_key& key);
  int64_t scaled(int64_t recorded_ns) const;

  feed next_;
  double time_scale_;
  bool ended_ = false;
  uint64_t read_ = 0;  // ordering stamp of every request placed, for ties
  uint64_t requests_read_ = 0;
  uint64_t independent_due_ = 0;  // independent requests read and not yet taken
  int64_t taken_until_ = 0;       // the latest `now` of take_due
  std::priority_queue<due_item, std::vector<due_item>, later> due_;
  std::multimap<turn_key, trace_request> parked_;  // by what they follow
  std::map<turn_key, int64_t> finished_at_;        // session turns that finished
};

}  // namespace kvtier
