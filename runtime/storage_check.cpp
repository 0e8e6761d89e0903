#include "runtime/storage_check.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "runtime/config/options.hpp"
#include "storage/backend_room.hpp"

namespace kvtier {

namespace {

// What Redis keeps beside a block's bytes: two keys and their entries.
constexpr uint64_t redis_overhead_per_block = 256;
// A string value's header and terminator in Redis (sds).
constexpr uint64_t redis_value_header = 16;

// The bytes jemalloc (Redis's allocator) hands out for `n`: above 16 KiB, sizes come in four
// classes per power of two, so a 4 MiB value (half of an 8 MiB block, plus its header) takes
// 5 MiB.
uint64_t jemalloc_class(uint64_t n) {
  if (n <= (16u << 10))
    return n;
  int top = 63 - __builtin_clzll(n - 1);
  uint64_t spacing = uint64_t{1} << (top - 2);
  return (n + spacing - 1) / spacing * spacing;
}

// What one block takes in a Redis node: its two parts, each rounded up by the allocator.
uint64_t redis_block_cost(uint64_t payload) {
  uint64_t half = payload / 2;
  return jemalloc_class(half + redis_value_header) +
         jemalloc_class(payload - half + redis_value_header) + redis_overhead_per_block;
}

// What a Redis node needs beside the blocks: its own start-up memory and the query buffer of a
// connection receiving one part.
uint64_t redis_reserve(uint64_t payload) {
  return (2u << 20) + 2 * jemalloc_class(payload - payload / 2 + redis_value_header);
}

// What kvtier itself keeps resident beside a Redis on this machine: the payloads in flight, on
// the GPU the pinned host tier of every instance (a modelled host tier holds no bytes), and its
// own working memory (index, trace reader, heap): 0.8 GB measured beyond the payloads on the
// Mooncake sample (BENCHMARKS.md, "A real L3 under load"), rounded up to 1 GiB.
constexpr uint64_t working_bytes = uint64_t{1} << 30;

uint64_t own_bytes(const deployment_plan& plan, uint64_t inflight_bytes) {
  uint64_t host = 0;
  if (plan.backend != copy_backend_kind::modelled)
    for (const instance_config& ic : plan.instances)
      host += uint64_t{ic.cache.host_blocks} * plan.storage.payload_bytes;
  return inflight_bytes + host + working_bytes;
}

std::string gb(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GB", static_cast<double>(bytes) / 1e9);
  return text;
}

struct pool_shape {
  uint64_t capacity = 0;  // blocks, all nodes
  uint32_t nodes = 1;
  uint64_t per_node() const { return (capacity + nodes - 1) / nodes; }
};

[[noreturn]] void refuse(const pool_shape& pool, uint64_t block_cost, uint64_t room,
                         const deployment_plan& plan, const std::string& where) {
  uint64_t fits = block_cost > 0 ? room / block_cost * pool.nodes : 0;
  uint32_t block_size = plan.run.block_size;
  throw config_error(
    "storage: the pool's " + std::to_string(pool.capacity) + " blocks of " +
    std::to_string(plan.storage.payload_bytes) + " bytes need " +
    gb(pool.per_node() * block_cost) + " on each of " + std::to_string(pool.nodes) +
    " node(s), but " + where + " has room for " + gb(room) + ": set storage.capacity_blocks=" +
    std::to_string(fits) + " (storage.capacity_tokens=" +
    std::to_string(fits * block_size) + ") or less, or a smaller storage.payload_bytes");
}

void check_redis(const deployment_plan& plan, const std::vector<std::string>& addresses,
                 const pool_shape& pool, uint64_t inflight_bytes, const machine_memory& machine,
                 std::ostream& warn) {
  uint64_t cost = redis_block_cost(plan.storage.payload_bytes);
  uint64_t need = pool.per_node() * cost;
  // Servers on this machine without maxmemory share what it has left beside kvtier's own bytes.
  size_t unbounded_local = 0;
  for (const std::string& a : addresses) {
    auto m = redis_memory_of(a, plan.storage.backend.redis_auth);
    unbounded_local += m && m->maxmemory == 0 && is_local_address(a);
  }
  for (const std::string& a : addresses) {
    auto m = redis_memory_of(a, plan.storage.backend.redis_auth);
    if (!m)
      continue;  // unreachable now: the backend said so when it dialled
    if (!m->policy.empty() && m->policy != "noeviction")
      warn << "kvtier: warning: redis " << a << " has maxmemory-policy " << m->policy
           << ": Redis may drop blocks the pool still indexes (they read as misses); set it to "
              "noeviction\n";
    uint64_t reserve = redis_reserve(plan.storage.payload_bytes);
    if (m->maxmemory > 0) {
      if (need + reserve > m->maxmemory)
        refuse(pool, cost, m->maxmemory > reserve ? m->maxmemory - reserve : 0, plan,
               "redis " + a + " (maxmemory, less " + gb(reserve) + " Redis needs beside blocks)");
      continue;
    }
    if (!is_local_address(a) || machine.available == 0) {
      warn << "kvtier: warning: redis " << a << " has no maxmemory: the pool's "
           << gb(need) << " per node are not checked against what it can hold\n";
      continue;
    }
    uint64_t own = own_bytes(plan, inflight_bytes);
    uint64_t left = machine.available > own ? machine.available - own : 0;
    uint64_t share = left / std::max<size_t>(1, unbounded_local);
    share = share > reserve ? share - reserve : 0;
    if (need > share)
      refuse(pool, cost, share, plan,
             "redis " + a + " (no maxmemory; this machine has " + gb(machine.available) +
               " available, of which kvtier keeps " + gb(own) +
               ": payloads in flight, the host tier's pinned memory and 1 GiB of its own)");
  }
}

// The nearest existing directory at or above `dir`: a directory the backend will make takes its
// space from the file system holding it.
std::string existing_ancestor(std::string dir) {
  struct stat st {};
  while (!dir.empty() && ::stat(dir.c_str(), &st) != 0) {
    size_t slash = dir.find_last_of('/');
    dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  }
  return dir.empty() ? "." : dir;
}

// The file backend keeps the files within the pool's capacity (every delete asked before a write
// runs before it: storage/file_backend.hpp), so the disk needs the capacity's files and nothing
// more: each block a file of its payload and one header page, rounded up to the file system's
// blocks.
void check_file(const deployment_plan& plan, const pool_shape& pool) {
  const backend_options& b = plan.storage.backend;
  if (b.file_quota_bytes > 0)
    return;  // a test's stand-in for a small disk: the run is meant to fill it
  // Directories on one file system share its free space.
  struct device_share {
    size_t dirs = 0;
    std::string first;
    uint64_t block = 4096;
  };
  std::map<dev_t, device_share> by_device;
  for (const std::string& dir : b.file_dirs) {
    std::string at = existing_ancestor(dir);
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0)
      continue;
    device_share& d = by_device[st.st_dev];
    if (d.dirs++ == 0) {
      d.first = at;
      d.block = std::max<uint64_t>(4096, static_cast<uint64_t>(st.st_blksize));
    }
  }
  for (const auto& [device, d] : by_device) {
    auto free = free_disk_bytes(d.first);
    if (!free)
      continue;
    uint64_t cost = (plan.storage.payload_bytes + 4096 + d.block - 1) / d.block * d.block;
    uint64_t share = *free / d.dirs;
    if (pool.per_node() * cost > share)
      refuse(pool, cost, share, plan, "the disk of " + d.first + " (free space)");
  }
}

}  // namespace

machine_memory read_machine_memory() {
  machine_memory m;
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib) {
    std::getline(in, unit);
    if (name == "MemTotal:")
      m.total = kib * 1024;
    else if (name == "MemAvailable:")
      m.available = kib * 1024;
  }
  return m;
}

uint64_t default_inflight_bytes(const machine_memory& m) {
  constexpr uint64_t lo = 256ull << 20, hi = 1ull << 30;
  return std::clamp<uint64_t>(m.total / 32, lo, hi);
}

void check_storage_room(const deployment_plan& plan, uint64_t inflight_bytes,
                        const machine_memory& machine, std::ostream& warn) {
  const storage_plan& s = plan.storage;
  pool_shape pool{s.pool.capacity_blocks, std::max<uint32_t>(1, s.pool.nodes)};
  if (pool.capacity == 0 || s.payload_bytes == 0)
    return;
  if (s.backend.kind == storage_backend_kind::redis)
    check_redis(plan, s.backend.redis, pool, inflight_bytes, machine, warn);
  if (s.backend.kind == storage_backend_kind::redis_cluster) {
    // The cluster spreads blocks over its masters by hash slot: each holds about its share.
    std::vector<std::string> masters = redis_cluster_masters(s.backend.redis_cluster,
                                                             s.backend.redis_auth);
    pool.nodes = static_cast<uint32_t>(std::max<size_t>(1, masters.size()));
    check_redis(plan, masters, pool, inflight_bytes, machine, warn);
  }
  if (s.backend.kind == storage_backend_kind::file)
    check_file(plan, pool);
}

}  // namespace kvtier
