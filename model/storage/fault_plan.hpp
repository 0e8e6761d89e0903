#pragma once

// Seeded faults of the storage pool (faults.*), deterministic in virtual time. Everything random
// is drawn from the run's seed, each kind of fault from a stream of its own, so that turning one
// kind on does not move the draws of another:
//
//  - node loss, at a time (one node) or at a rate (a Poisson process over the pool, the node
//    drawn uniformly): the node's keys are gone, and it refuses writes until it comes back empty
//    `down_ns` later; a loss drawn for a node already down does nothing;
//  - slow link: a node's read and write bandwidth times `slow_factor` for `slow_ns`, at a time or
//    at a rate; a window drawn for a node already slow does nothing;
//  - a failed get or put of a key, each with its probability, drawn per key in the order the pool
//    serves them.
//
// The plan is a queue of timed events, produced lazily (a rate gives an endless sequence); the
// storage actor applies each at its instant before anything later happens.

#include <cstdint>
#include <optional>
#include <vector>

namespace kvtier {

struct fault_options {
  uint64_t seed = 0;
  int64_t node_loss_at_ns = -1;  ///< one loss at this time; -1 = none
  uint32_t node_loss_node = 0;
  double node_losses_per_hour = 0;
  int64_t down_ns = 30'000'000'000;
  int64_t slow_at_ns = -1;  ///< one slow window from this time; -1 = none
  uint32_t slow_node = 0;
  double slow_per_hour = 0;
  int64_t slow_ns = 10'000'000'000;
  double slow_factor = 0.1;
  double get_fail_probability = 0;
  double put_fail_probability = 0;

  /// Whether any fault is configured.
  bool any() const {
    return node_loss_at_ns >= 0 || node_losses_per_hour > 0 || slow_at_ns >= 0 ||
           slow_per_hour > 0 || get_fail_probability > 0 || put_fail_probability > 0;
  }
};

/// A deterministic 64-bit generator (splitmix64): the same seed gives the same draws on every
/// platform, which std::*_distribution does not promise.
class fault_stream {
 public:
  explicit fault_stream(uint64_t seed) : state_(seed) {}
  uint64_t next();
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// An exponential wait of mean `mean_ns`, at least 1 ns.
  int64_t exponential_ns(double mean_ns);

 private:
  uint64_t state_;
};

class fault_plan {
 public:
  enum class kind : uint8_t { node_loss, node_back, slow_start, slow_end };
  struct event {
    int64_t at = 0;
    kind what = kind::node_loss;
    uint32_t node = 0;
    bool drawn = false;  ///< from a rate (the next one is drawn when it is taken)
  };

  fault_plan(const fault_options& options, uint32_t nodes);

  /// When the next event happens (INT64_MAX: none).
  int64_t next_at() const;
  /// Takes the next event. The caller tells the plan what it did with it (applied), so that the
  /// follow-up (the node coming back, the window ending) is scheduled only for what happened.
  event pop();
  /// A loss or slow window was applied: schedule its end.
  void applied(const event& e);

  bool fail_get() { return draw(options_.get_fail_probability, get_stream_); }
  bool fail_put() { return draw(options_.put_fail_probability, put_stream_); }
  const fault_options& options() const { return options_; }

 private:
  static bool draw(double p, fault_stream& s) { return p > 0 && s.uniform() < p; }
  void push(event e);
  void draw_next_loss(int64_t after);
  void draw_next_slow(int64_t after);

  fault_options options_;
  uint32_t nodes_;
  fault_stream loss_stream_, slow_stream_, get_stream_, put_stream_;
  std::vector<std::pair<event, uint64_t>> queue_;  // a heap on (at, order)
  uint64_t order_ = 0;
};

}  // namespace kvtier
