#include "model/links/link_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

namespace {

// Bytes left below this count as through: floating-point residue of a finished operation.
constexpr double residue = 1e-6;

}  // namespace

link_model::link_id link_model::add_link(std::string name, double gbps) {
  KVTIER_ASSERT(gbps > 0);
  capacity_.push_back(gbps);  // 1 GB/s is exactly 1 byte per ns
  moving_on_.push_back(0);
  stats_.push_back({std::move(name), gbps, 0, 0, 0});
  return static_cast<link_id>(capacity_.size() - 1);
}

link_model::flow_id link_model::start(int64_t now, std::vector<link_id> links,
                                      std::vector<op> ops, double cap_gbps) {
  KVTIER_ASSERT(cap_gbps >= 0);
  KVTIER_ASSERT(!ops.empty());
  KVTIER_ASSERT(now >= now_);
  KVTIER_ASSERT(next_event() >= now);  // the caller advanced to `now` first
  settle(now);
  flow f;
  f.id = next_id_++;
  for (link_id l : links) {
    KVTIER_ASSERT(l < capacity_.size());
    ++stats_[l].flows;
  }
  f.links = std::move(links);
  f.ops = std::move(ops);
  f.latency_end = time_add(now, f.ops[0].latency_ns);
  if (cap_gbps > 0) {
    f.cap = cap_gbps;  // 1 GB/s is exactly 1 byte per ns
    ++capped_;
  }
  flows_.push_back(std::move(f));
  return flows_.back().id;
}

void link_model::set_gbps(link_id link, double gbps, int64_t now) {
  KVTIER_ASSERT(link < capacity_.size() && gbps > 0);
  KVTIER_ASSERT(now >= now_ && next_event() >= now);
  settle(now);
  capacity_[link] = gbps;
  update_rates();
}

void link_model::update_rates() {
  std::fill(moving_on_.begin(), moving_on_.end(), 0);
  for (const flow& f : flows_)
    if (f.moving)
      for (link_id l : f.links)
        ++moving_on_[l];
  if (capped_ > 0) {
    // Water-filling per link: flows capped below the level keep their cap, the rest share what
    // they leave equally. Caps in ascending order; a cap at or above the level fills nothing.
    std::vector<std::vector<double>> caps(capacity_.size());
    for (const flow& f : flows_)
      if (f.moving)
        for (link_id l : f.links)
          caps[l].push_back(f.cap);
    level_.assign(capacity_.size(), std::numeric_limits<double>::infinity());
    for (size_t l = 0; l < caps.size(); ++l) {
      std::sort(caps[l].begin(), caps[l].end());
      double left = capacity_[l];
      size_t n = caps[l].size();
      for (double c : caps[l]) {
        if (c * static_cast<double>(n) >= left) {
          level_[l] = left / static_cast<double>(n);
          break;
        }
        left -= c;
        --n;
      }
    }
  }
  for (flow& f : flows_) {
    if (!f.moving)
      continue;
    double rate = f.cap;
    for (link_id l : f.links)
      rate = std::min(rate, share_of(l));
    f.rate = rate;
  }
}

double link_model::share_of(link_id l) const {
  return capped_ > 0 ? level_[l] : capacity_[l] / moving_on_[l];
}

int64_t link_model::finish_time(const flow& f) const {
  if (!f.moving)
    return f.latency_end;
  if (f.remaining <= residue || std::isinf(f.rate))
    return now_;
  return time_add(now_, time_from(std::ceil(f.remaining / f.rate)));
}

int64_t link_model::next_event() const {
  int64_t t = never;
  for (const flow& f : flows_)
    t = std::min(t, finish_time(f));
  return t;
}

void link_model::settle(int64_t to) {
  if (to <= now_)
    return;
  double dt = static_cast<double>(to - now_);
  for (size_t l = 0; l < moving_on_.size(); ++l)
    if (moving_on_[l] > 0)
      stats_[l].busy_ns += to - now_;
  for (flow& f : flows_)
    if (f.moving && !std::isinf(f.rate))
      f.remaining -= f.rate * dt;
  now_ = to;
}

void link_model::advance(int64_t now, std::vector<op_done>& out) {
  KVTIER_ASSERT(now >= now_);
  for (;;) {
    int64_t t = next_event();
    if (t > now)
      break;
    settle(t);
    // Latencies that ended start moving bytes; then every operation whose bytes are through
    // completes, and its flow waits for the next operation's latency (or ends).
    for (flow& f : flows_) {
      if (!f.moving && f.latency_end <= t) {
        f.moving = true;
        f.remaining = static_cast<double>(f.ops[f.index].bytes);
      }
    }
    update_rates();
    for (flow& f : flows_) {
      if (!f.moving || finish_time(f) > t)
        continue;
      const op& done = f.ops[f.index];
      for (link_id l : f.links)
        stats_[l].bytes += done.bytes;
      bool last = f.index + 1 == f.ops.size();
      out.push_back({f.id, f.index, last, t});
      if (!last) {
        ++f.index;
        f.moving = false;
        f.latency_end = time_add(t, f.ops[f.index].latency_ns);
      }
    }
    flows_.erase(std::remove_if(flows_.begin(), flows_.end(),
                                [&](const flow& f) {
                                  bool done = f.moving && f.index + 1 == f.ops.size()
                                              && finish_time(f) <= t;
                                  if (done && !std::isinf(f.cap))
                                    --capped_;
                                  return done;
                                }),
                 flows_.end());
    update_rates();
  }
  settle(now);
}

}  // namespace kvtier
