#pragma once

// What both `kvtier bench serve` loops (closed, and --open) share: a step's request marks as the
// protocol writes them (docs/protocol.md, `step`), and a latency percentile.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "serve/wire/map_writer.hpp"

namespace kvtier::bench_serve {

/// `key`: [[request, tokens], ...], a step's admits or computed entries.
inline void pack_marks(serve::map_writer& w, const char* key,
                       const std::vector<std::pair<uint64_t, uint32_t>>& marks) {
  auto& pk = w.key(key);
  pk.pack_array(static_cast<uint32_t>(marks.size()));
  for (auto& [req, tokens] : marks) {
    pk.pack_array(2);
    pk.pack(req);
    pk.pack(tokens);
  }
}

/// The `p` quantile of latencies in ns, in µs (0 when there are none); reorders `v`.
inline double percentile_us(std::vector<int64_t>& v, double p) {
  if (v.empty())
    return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return static_cast<double>(v[i]) / 1000.0;
}

}  // namespace kvtier::bench_serve
