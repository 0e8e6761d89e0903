#include "sim/report/timeseries.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <utility>

namespace kvtier {

namespace {

constexpr int64_t second_ns = 1'000'000'000;

// The links of docs/outputs.md's columns, in column order; fill (--verify) is on none.
enum class series_link : size_t { h2d, d2h, storage_read, storage_write, count };
constexpr size_t link_count = static_cast<size_t>(series_link::count);

bool link_of(transfer_kind k, series_link& out) {
  switch (k) {
    case transfer_kind::swap_in: out = series_link::h2d; return true;
    case transfer_kind::backup:
    case transfer_kind::write_back: out = series_link::d2h; return true;
    case transfer_kind::load: out = series_link::storage_read; return true;
    case transfer_kind::store: out = series_link::storage_write; return true;
    case transfer_kind::fill: return false;
  }
  return false;
}

// Adds `weight` times the share of each second that [from, to) covers.
void add_span(std::vector<double>& per_second, int64_t from, int64_t to, double weight) {
  from = std::max<int64_t>(from, 0);
  for (int64_t k = from / second_ns; k * second_ns < to && k < int64_t(per_second.size()); ++k) {
    int64_t lo = std::max(from, k * second_ns), hi = std::min(to, (k + 1) * second_ns);
    per_second[static_cast<size_t>(k)] += weight * double(hi - lo) / double(second_ns);
  }
}

size_t second_of(int64_t t, size_t seconds) {
  return std::min(static_cast<size_t>(std::max<int64_t>(t, 0) / second_ns), seconds - 1);
}

// `tokens` spread evenly over [from, to) in whole tokens: each second gets the tokens computed
// by its end less those computed by its start, so the seconds add up to exactly `tokens`.
void spread_tokens(std::vector<uint64_t>& per_second, int64_t from, int64_t to,
                   uint64_t tokens) {
  size_t n = per_second.size();
  if (to <= from) {
    per_second[second_of(from, n)] += tokens;
    return;
  }
  uint64_t done = 0;
  for (size_t k = second_of(from, n); done < tokens; ++k) {
    int64_t end = std::min(to, int64_t(k + 1) * second_ns);
    uint64_t by_end = k + 1 >= n ? tokens
                                 : static_cast<uint64_t>(static_cast<unsigned __int128>(tokens)
                                                         * uint64_t(end - from)
                                                         / uint64_t(to - from));
    per_second[k] += by_end - done;
    done = by_end;
  }
}

// Merged busy intervals of one link: overlapping transfers count once.
void add_busy(std::vector<double>& per_second, std::vector<std::pair<int64_t, int64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  int64_t lo = -1, hi = -1;
  for (auto [from, to] : spans) {
    if (from > hi) {
      if (hi > lo)
        add_span(per_second, lo, hi, 1.0);
      lo = from;
    }
    hi = std::max(hi, to);
  }
  if (hi > lo)
    add_span(per_second, lo, hi, 1.0);
}

struct series {
  std::vector<double> waiting, running;
  std::array<std::vector<double>, link_count> busy;
  std::array<std::vector<double>, link_count> moved;  ///< blocks, spread over each transfer
  per_tier<std::vector<uint64_t>> hit_tokens;
  std::vector<uint64_t> computed;

  explicit series(size_t n) : waiting(n), running(n), computed(n) {
    for (auto& b : busy)
      b.resize(n);
    for (auto& m : moved)
      m.resize(n);
    for (auto& h : hit_tokens)
      h.resize(n);
  }
};

// Finished requests only, as summary.json counts them (sim/report/request_tally.cpp): the
// columns add up to its hits.tokens.* and steps.prefill_tokens.
void add_requests(series& s, const std::vector<request_record>& requests, size_t n) {
  for (const request_record& q : requests) {
    if (q.rejected || q.finish_ns < 0)
      continue;
    add_span(s.waiting, q.arrival_ns, q.admitted_ns, 1.0);
    add_span(s.running, q.admitted_ns, q.finish_ns, 1.0);
    for (tier t : all_tiers)
      at(s.hit_tokens, t)[second_of(q.admitted_ns, n)] += at(q.first_hit_tokens, t);
    spread_tokens(s.computed, q.admitted_ns, std::max(q.first_token_ns, q.admitted_ns),
                  q.computed_tokens);
  }
}

void add_links(series& s, const engine_report& e) {
  std::array<std::vector<std::pair<int64_t, int64_t>>, link_count> spans;
  series_link link{};
  for (const transfer_log& l : e.log) {
    if (l.end_ns < 0 || !link_of(l.kind, link))
      continue;
    int64_t from = l.end_ns - l.duration_ns;
    spans[static_cast<size_t>(link)].push_back({from, l.end_ns});
    auto& moved = s.moved[static_cast<size_t>(link)];
    if (l.duration_ns > 0)
      add_span(moved, from, l.end_ns, double(l.blocks) * double(second_ns) / double(l.duration_ns));
    else
      moved[second_of(l.end_ns, moved.size())] += l.blocks;
  }
  for (size_t k = 0; k < link_count; ++k)
    add_busy(s.busy[k], std::move(spans[k]));
}

}  // namespace

void write_timeseries(std::ostream& out, const full_result& r,
                      const tier_occupancy_sampler& occupancy) {
  int64_t end = r.last_event_ns;
  for (const request_record& q : r.scheduler.requests)
    end = std::max(end, q.finish_ns);
  size_t n = static_cast<size_t>(std::max<int64_t>(1, (end + second_ns - 1) / second_ns));
  series s(n);
  add_requests(s, r.scheduler.requests, n);
  add_links(s, r.engine);
  auto blocks = occupancy.per_second(n);
  // No storage column: the storage pool's blocks are not in the controllers' index, whose
  // events the sampler counts (docs/outputs.md, "timeseries.csv").
  out << "second,waiting_requests,running_requests,device_blocks,host_blocks,"
         "h2d_busy,d2h_busy,storage_read_busy,storage_write_busy,device_hit_tokens,"
         "host_hit_tokens,storage_hit_tokens,computed_tokens,h2d_blocks,d2h_blocks,"
         "storage_read_blocks,storage_write_blocks\n";
  char line[512];
  for (size_t k = 0; k < n; ++k) {
    const auto& b = s.busy;
    std::snprintf(line, sizeof line,
                  "%zu,%.3f,%.3f,%lld,%lld,%.4f,%.4f,%.4f,%.4f,%llu,%llu,%llu,%llu,%.3f,%.3f,"
                  "%.3f,%.3f\n", k,
                  s.waiting[k], s.running[k], (long long)at(blocks[k], tier::device),
                  (long long)at(blocks[k], tier::host),
                  b[0][k], b[1][k], b[2][k], b[3][k],
                  (unsigned long long)at(s.hit_tokens, tier::device)[k],
                  (unsigned long long)at(s.hit_tokens, tier::host)[k],
                  (unsigned long long)at(s.hit_tokens, tier::storage)[k],
                  (unsigned long long)s.computed[k], s.moved[0][k], s.moved[1][k],
                  s.moved[2][k], s.moved[3][k]);
    out << line;
  }
}

}  // namespace kvtier
