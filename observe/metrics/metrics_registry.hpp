#pragma once

// A small metrics registry rendered in Prometheus's text exposition format (version 0.0.4):
// counters, gauges and histograms, each a family of series told apart by labels. Updates are
// lock-free atomics, so any thread may count; render() runs the registered collectors (which set
// figures read from elsewhere at scrape time) and writes every family in registration order.
// kvtier's metric names and their meaning: docs/metrics.md.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kvtier {

using metric_labels = std::vector<std::pair<std::string, std::string>>;

enum class metric_type : uint8_t { counter, gauge, histogram };
const char* to_string(metric_type t);

/// A double that several threads may add to.
class atomic_double {
 public:
  void add(double by);
  void set(double v) { bits_.store(to_bits(v), std::memory_order_relaxed); }
  double get() const { return from_bits(bits_.load(std::memory_order_relaxed)); }

 private:
  static uint64_t to_bits(double v);
  static double from_bits(uint64_t b);
  std::atomic<uint64_t> bits_{0};
};

class counter {
 public:
  /// Adds `by` (must be >= 0: a counter never goes down).
  void inc(double by = 1);
  /// Mirrors a total kept elsewhere (a collector's copy of a monotonic count).
  void set_total(double total) { value_.set(total); }
  double value() const { return value_.get(); }

 private:
  atomic_double value_;
};

class gauge {
 public:
  void set(double v) { value_.set(v); }
  void add(double by) { value_.add(by); }
  double value() const { return value_.get(); }

 private:
  atomic_double value_;
};

class histogram {
 public:
  /// `bounds`: the buckets' upper bounds, finite and strictly increasing (+Inf is implied).
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  /// Observations at or below each bound, cumulative, then the count of all (+Inf).
  std::vector<uint64_t> cumulative_counts() const;
  double sum() const { return sum_.get(); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative; last: +Inf
  atomic_double sum_;
  std::atomic<uint64_t> count_{0};
};

/// Upper bounds from `start`, each `factor` times the previous, `count` of them.
std::vector<double> exponential_buckets(double start, double factor, int count);

class metrics_registry {
 public:
  metrics_registry();
  ~metrics_registry();

  /// The series of family `name` with these labels, made on first use. A family keeps the type
  /// and help it was first registered with; a name, label name or type that breaks the format's
  /// rules (or disagrees with an earlier registration) throws std::invalid_argument.
  counter& add_counter(const std::string& name, const std::string& help,
                       const metric_labels& labels = {});
  gauge& add_gauge(const std::string& name, const std::string& help,
                   const metric_labels& labels = {});
  histogram& add_histogram(const std::string& name, const std::string& help,
                           const std::vector<double>& bounds, const metric_labels& labels = {});

  /// Runs before each render (under the render lock), to set figures kept elsewhere.
  void add_collector(std::function<void()> collect);

  /// The text exposition of every family.
  std::string render();

 private:
  struct series;
  struct family;
  family& family_of(const std::string& name, const std::string& help, metric_type type);
  series& series_of(family& f, const metric_labels& labels, const std::vector<double>* bounds);

  // Registration and rendering; updates need no lock. Recursive: a collector may register the
  // series it learns of at scrape time (a link named in a report).
  std::recursive_mutex mutex_;
  std::vector<std::unique_ptr<family>> families_;
  std::vector<std::function<void()>> collectors_;
};

/// Whether `name` is a valid name for an exported metric ([a-zA-Z_][a-zA-Z0-9_]*): Prometheus
/// reserves ':' for recording rules (docs/metrics.md).
bool valid_metric_name(const std::string& name);
/// Whether `name` is a valid label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__").
bool valid_label_name(const std::string& name);
/// A label value as the text format writes it between quotes.
std::string escape_label_value(const std::string& v);
/// A HELP text as the text format writes it.
std::string escape_help(const std::string& v);
/// A sample value: shortest round-trip decimal, or +Inf, -Inf, NaN.
std::string format_sample_value(double v);

}  // namespace kvtier
