#include "observe/metrics/metrics_registry.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace kvtier {

const char* to_string(metric_type t) {
  switch (t) {
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
  }
  return "untyped";
}

uint64_t atomic_double::to_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

double atomic_double::from_bits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

void atomic_double::add(double by) {
  uint64_t old = bits_.load(std::memory_order_relaxed);
  while (!bits_.compare_exchange_weak(old, to_bits(from_bits(old) + by),
                                      std::memory_order_relaxed)) {
  }
}

void counter::inc(double by) {
  if (!(by >= 0))
    throw std::invalid_argument("a counter cannot go down");
  value_.add(by);
}

histogram::histogram(std::vector<double> bounds)
  : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && !(bounds_[i] > bounds_[i - 1])))
      throw std::invalid_argument("histogram bounds must be finite and strictly increasing");
  }
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i])
    ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.add(v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> histogram::cumulative_counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1)
    throw std::invalid_argument("exponential buckets need start > 0, factor > 1, count >= 1");
  std::vector<double> out;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor)
    out.push_back(b);
  return out;
}

// -- names and text -----------------------------------------------------------------------------

namespace {

bool name_char(char c, bool first) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  bool digit = c >= '0' && c <= '9';
  return alpha || (!first && digit);
}

// Metric and label names alike: ':' is Prometheus's for recording rules, not for exporters.
bool valid_name(const std::string& name) {
  if (name.empty())
    return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0))
      return false;
  return true;
}

}  // namespace

bool valid_metric_name(const std::string& name) {
  return valid_name(name);
}

bool valid_label_name(const std::string& name) {
  return valid_name(name) && name.compare(0, 2, "__") != 0;
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_sample_value(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// -- the registry -------------------------------------------------------------------------------

struct metrics_registry::series {
  metric_labels labels;
  std::unique_ptr<counter> c;
  std::unique_ptr<gauge> g;
  std::unique_ptr<histogram> h;
};

struct metrics_registry::family {
  std::string name;
  std::string help;
  metric_type type = metric_type::counter;
  std::vector<std::unique_ptr<series>> members;
};

metrics_registry::metrics_registry() = default;
metrics_registry::~metrics_registry() = default;

metrics_registry::family& metrics_registry::family_of(const std::string& name,
                                                      const std::string& help, metric_type type) {
  if (!valid_metric_name(name))
    throw std::invalid_argument("invalid metric name '" + name + "'");
  for (auto& f : families_) {
    if (f->name != name)
      continue;
    if (f->type != type)
      throw std::invalid_argument("metric '" + name + "' is a " + to_string(f->type)
                                  + ", not a " + to_string(type));
    return *f;
  }
  families_.push_back(std::make_unique<family>(family{name, help, type, {}}));
  return *families_.back();
}

metrics_registry::series& metrics_registry::series_of(family& f, const metric_labels& labels,
                                                      const std::vector<double>* bounds) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i].first;
    if (!valid_label_name(l) || (f.type == metric_type::histogram && l == "le"))
      throw std::invalid_argument("invalid label name '" + l + "' on metric '" + f.name + "'");
    for (size_t j = 0; j < i; ++j)
      if (labels[j].first == l)
        throw std::invalid_argument("label '" + l + "' twice on metric '" + f.name + "'");
  }
  for (auto& s : f.members)
    if (s->labels == labels)
      return *s;
  auto s = std::make_unique<series>();
  s->labels = labels;
  switch (f.type) {
    case metric_type::counter: s->c = std::make_unique<counter>(); break;
    case metric_type::gauge: s->g = std::make_unique<gauge>(); break;
    case metric_type::histogram: s->h = std::make_unique<histogram>(*bounds); break;
  }
  f.members.push_back(std::move(s));
  return *f.members.back();
}

counter& metrics_registry::add_counter(const std::string& name, const std::string& help,
                                       const metric_labels& labels) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return *series_of(family_of(name, help, metric_type::counter), labels, nullptr).c;
}

gauge& metrics_registry::add_gauge(const std::string& name, const std::string& help,
                                   const metric_labels& labels) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return *series_of(family_of(name, help, metric_type::gauge), labels, nullptr).g;
}

histogram& metrics_registry::add_histogram(const std::string& name, const std::string& help,
                                           const std::vector<double>& bounds,
                                           const metric_labels& labels) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  series& s = series_of(family_of(name, help, metric_type::histogram), labels, &bounds);
  if (s.h->bounds() != bounds)
    throw std::invalid_argument("metric '" + name + "' registered again with other buckets");
  return *s.h;
}

void metrics_registry::add_collector(std::function<void()> collect) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  collectors_.push_back(std::move(collect));
}

namespace {

void write_labels(std::string& out, const metric_labels& labels, const char* extra_name = nullptr,
                  const std::string& extra_value = {}) {
  if (labels.empty() && !extra_name)
    return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first)
      out += ',';
    first = false;
    out += k + "=\"" + escape_label_value(v) + '"';
  }
  if (extra_name) {
    if (!first)
      out += ',';
    out += std::string(extra_name) + "=\"" + escape_label_value(extra_value) + '"';
  }
  out += '}';
}

}  // namespace

std::string metrics_registry::render() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  for (auto& collect : collectors_)
    collect();
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f->name + ' ' + escape_help(f->help) + '\n';
    out += "# TYPE " + f->name + ' ' + to_string(f->type) + '\n';
    for (const auto& s : f->members) {
      switch (f->type) {
        case metric_type::counter:
        case metric_type::gauge:
          out += f->name;
          write_labels(out, s->labels);
          out += ' '
                 + format_sample_value(f->type == metric_type::counter ? s->c->value()
                                                                      : s->g->value())
                 + '\n';
          break;
        case metric_type::histogram: {
          std::vector<uint64_t> counts = s->h->cumulative_counts();
          const auto& bounds = s->h->bounds();
          for (size_t i = 0; i <= bounds.size(); ++i) {
            out += f->name + "_bucket";
            write_labels(out, s->labels, "le",
                         i < bounds.size() ? format_sample_value(bounds[i]) : "+Inf");
            out += ' ' + std::to_string(counts[i]) + '\n';
          }
          out += f->name + "_sum";
          write_labels(out, s->labels);
          out += ' ' + format_sample_value(s->h->sum()) + '\n';
          out += f->name + "_count";
          write_labels(out, s->labels);
          out += ' ' + std::to_string(counts.back()) + '\n';
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace kvtier
