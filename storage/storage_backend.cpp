#include "storage/storage_backend.hpp"

#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <stdexcept>

#include "storage/file_backend.hpp"
#include "storage/memory_backend.hpp"
#include "storage/redis_backend.hpp"
#include "storage/redis_cluster_backend.hpp"

namespace kvtier {

namespace {

std::string prefix_of(const block_namespace& ns) {
  return "kvtier:" + ns.model + ":" + ns.dtype + ":";
}

}  // namespace

std::string block_name(const block_namespace& ns, uint64_t hash) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return prefix_of(ns) + hex;
}

std::optional<uint64_t> hash_of_block_name(const block_namespace& ns, const std::string& name) {
  std::string prefix = prefix_of(ns);
  if (name.size() < prefix.size() + 16 || name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  uint64_t h = 0;
  for (size_t i = prefix.size(); i < prefix.size() + 16; ++i) {
    char c = name[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0)
      return std::nullopt;
    h = h << 4 | static_cast<uint64_t>(d);
  }
  if (name.size() > prefix.size() + 16 && name[prefix.size() + 16] != ':')
    return std::nullopt;
  return h;
}

std::unique_ptr<storage_backend> make_storage_backend(const backend_options& o) {
  if (o.kind == "model")
    return nullptr;
  // Payloads are megabytes each, allocated and freed by the thousand: kept in the heap rather than
  // mapped and unmapped one by one, they are not page-faulted in afresh (and zeroed) every time.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (o.kind == "memory")
    return std::make_unique<memory_backend>(o.nodes);
  // A Redis node that dies while a command is being written to it must fail that write (EPIPE),
  // not stop the process (hiredis writes with write(2), which raises SIGPIPE on a closed socket).
  if (o.kind == "redis" || o.kind == "redis_cluster")
    std::signal(SIGPIPE, SIG_IGN);
  if (o.kind == "redis")
    return std::make_unique<redis_backend>(o);
  if (o.kind == "redis_cluster")
    return std::make_unique<redis_cluster_backend>(o);
  if (o.kind == "file")
    return std::make_unique<file_backend>(o);
  throw std::invalid_argument("storage.backend: unknown backend '" + o.kind +
                              "'; expected model, memory, redis, redis_cluster or file");
}

}  // namespace kvtier
