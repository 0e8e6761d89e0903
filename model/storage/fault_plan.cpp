#include "model/storage/fault_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

namespace {

constexpr double ns_per_hour = 3600e9;

// Distinct streams of one seed (splitmix64 decorrelates nearby states).
constexpr uint64_t loss_salt = 0x6c6f7373ULL, slow_salt = 0x736c6f77ULL,
                   get_salt = 0x67657420ULL, put_salt = 0x70757420ULL;

bool later(const std::pair<fault_plan::event, uint64_t>& a,
           const std::pair<fault_plan::event, uint64_t>& b) {
  return a.first.at != b.first.at ? a.first.at > b.first.at : a.second > b.second;
}

}  // namespace

uint64_t fault_stream::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t fault_stream::exponential_ns(double mean_ns) {
  double u = uniform();
  return std::max<int64_t>(1, time_from(-std::log1p(-u) * mean_ns));
}

fault_plan::fault_plan(const fault_options& options, uint32_t nodes)
  : options_(options),
    nodes_(nodes),
    loss_stream_(options.seed ^ loss_salt),
    slow_stream_(options.seed ^ slow_salt),
    get_stream_(options.seed ^ get_salt),
    put_stream_(options.seed ^ put_salt) {
  KVTIER_ASSERT(nodes > 0);
  if (options.node_loss_at_ns >= 0)
    push({options.node_loss_at_ns, kind::node_loss, options.node_loss_node % nodes});
  if (options.slow_at_ns >= 0)
    push({options.slow_at_ns, kind::slow_start, options.slow_node % nodes});
  draw_next_loss(0);
  draw_next_slow(0);
}

void fault_plan::push(event e) {
  queue_.emplace_back(e, order_++);
  std::push_heap(queue_.begin(), queue_.end(), later);
}

void fault_plan::draw_next_loss(int64_t after) {
  if (options_.node_losses_per_hour <= 0)
    return;
  int64_t at = time_add(after, loss_stream_.exponential_ns(ns_per_hour / options_.node_losses_per_hour));
  auto node = static_cast<uint32_t>(loss_stream_.next() % nodes_);
  push({at, kind::node_loss, node, true});
}

void fault_plan::draw_next_slow(int64_t after) {
  if (options_.slow_per_hour <= 0)
    return;
  int64_t at = time_add(after, slow_stream_.exponential_ns(ns_per_hour / options_.slow_per_hour));
  auto node = static_cast<uint32_t>(slow_stream_.next() % nodes_);
  push({at, kind::slow_start, node, true});
}

int64_t fault_plan::next_at() const {
  return queue_.empty() ? std::numeric_limits<int64_t>::max() : queue_.front().first.at;
}

fault_plan::event fault_plan::pop() {
  KVTIER_ASSERT(!queue_.empty());
  std::pop_heap(queue_.begin(), queue_.end(), later);
  event e = queue_.back().first;
  queue_.pop_back();
  // A rate's next event is drawn as this one is taken, so the queue holds one of each at most.
  if (e.drawn && e.what == kind::node_loss)
    draw_next_loss(e.at);
  if (e.drawn && e.what == kind::slow_start)
    draw_next_slow(e.at);
  return e;
}

void fault_plan::applied(const event& e) {
  if (e.what == kind::node_loss)
    push({time_add(e.at, options_.down_ns), kind::node_back, e.node});
  else if (e.what == kind::slow_start)
    push({time_add(e.at, options_.slow_ns), kind::slow_end, e.node});
}

}  // namespace kvtier
