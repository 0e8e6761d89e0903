// The copy-conditions probe's pure parts: the host-id scattering, the ratios, the table and the
// JSON. Tested without a device.

#include "gpu/bench/copy_conditions.hpp"

#include <algorithm>
#include <cstdio>

#include "gpu/gpu_error.hpp"
#include "gpu/verify_pattern.hpp"

namespace kvtier::gpu {

const char* to_string(copy_condition c) {
  switch (c) {
    case copy_condition::baseline: return "baseline";
    case copy_condition::callbacks: return "callbacks";
    case copy_condition::scattered_host: return "scattered-host";
    case copy_condition::compute_thread: return "compute-thread";
    case copy_condition::device_runs: return "device-runs";
    case copy_condition::callbacks_compute: return "callbacks+compute";
    case copy_condition::replay_like: return "replay-like";
  }
  return "?";
}

std::vector<copy_condition> all_copy_conditions() {
  return {copy_condition::baseline,       copy_condition::callbacks,
          copy_condition::scattered_host, copy_condition::compute_thread,
          copy_condition::device_runs,    copy_condition::callbacks_compute,
          copy_condition::replay_like};
}

void rate_against_baseline(std::vector<condition_figure>& cells) {
  for (condition_figure& c : cells)
    c.gbps = c.median_ns > 0 ? static_cast<double>(c.bytes) / c.median_ns : 0;
  for (condition_figure& c : cells) {
    c.of_baseline = 0;
    for (const condition_figure& b : cells)
      if (b.condition == copy_condition::baseline && b.blocks == c.blocks
          && b.direction == c.direction && b.gbps > 0)
        c.of_baseline = c.gbps / b.gbps;
  }
}

std::vector<uint32_t> scattered_host_ids(uint64_t seed, uint32_t count, uint32_t pool) {
  if (count == 0)
    return {};
  if (pool < 2 * count - 1)
    throw gpu_error("cannot scatter " + std::to_string(count) + " host ids over "
                    + std::to_string(pool) + " blocks with none consecutive");
  // count distinct values y of [0, pool - count + 1), sorted; x_i = y_i + i then lie at least
  // two apart and below pool.
  std::vector<uint32_t> values(pool - count + 1);
  for (uint32_t i = 0; i < values.size(); ++i)
    values[i] = i;
  uint64_t state = seed;
  auto below = [&](uint64_t n) { return mix64(state += 0x9e3779b97f4a7c15ull) % n; };
  for (uint32_t i = 0; i < count; ++i)
    std::swap(values[i], values[i + below(values.size() - i)]);
  std::vector<uint32_t> ids(values.begin(), values.begin() + count);
  std::sort(ids.begin(), ids.end());
  for (uint32_t i = 0; i < count; ++i)
    ids[i] += i;
  for (size_t i = ids.size(); i > 1; --i)
    std::swap(ids[i - 1], ids[below(i)]);
  return ids;
}

namespace {

const condition_figure* cell_of(const std::vector<condition_figure>& cells, copy_condition c,
                                uint32_t blocks, transfer_direction d) {
  for (const condition_figure& f : cells)
    if (f.condition == c && f.blocks == blocks && f.direction == d)
      return &f;
  return nullptr;
}

}  // namespace

std::string format_conditions_table(const std::vector<condition_figure>& cells,
                                    uint32_t block_size) {
  std::vector<uint32_t> sizes;
  for (const condition_figure& f : cells)
    if (std::find(sizes.begin(), sizes.end(), f.blocks) == sizes.end())
      sizes.push_back(f.blocks);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "copy rates under replay conditions (%u-token blocks, default method):\n"
                "  %-17s %6s %9s %8s %9s %8s\n",
                block_size, "condition", "blocks", "H2D GB/s", "of base", "D2H GB/s", "of base");
  std::string out = buf;
  for (copy_condition c : all_copy_conditions())
    for (uint32_t blocks : sizes) {
      const condition_figure* h = cell_of(cells, c, blocks, transfer_direction::h2d);
      const condition_figure* d = cell_of(cells, c, blocks, transfer_direction::d2h);
      if (h == nullptr && d == nullptr)
        continue;
      std::snprintf(buf, sizeof buf, "  %-17s %6u %9.2f %7.1f%% %9.2f %7.1f%%\n", to_string(c),
                    blocks, h ? h->gbps : 0.0, h ? 100 * h->of_baseline : 0.0,
                    d ? d->gbps : 0.0, d ? 100 * d->of_baseline : 0.0);
      out += buf;
    }
  return out;
}

nlohmann::json conditions_json(const std::vector<condition_figure>& cells) {
  nlohmann::json out = nlohmann::json::array();
  for (const condition_figure& f : cells)
    out.push_back({{"condition", to_string(f.condition)},
                   {"direction", to_string(f.direction)},
                   {"blocks", f.blocks},
                   {"bytes", f.bytes},
                   {"median_ms", f.median_ns / 1e6},
                   {"gbps", f.gbps},
                   {"of_baseline", f.of_baseline},
                   {"verified", f.verified}});
  return out;
}

}  // namespace kvtier::gpu
