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

const char* to_string(storage_backend_kind k) {
  switch (k) {
    case storage_backend_kind::model: return "model";
    case storage_backend_kind::memory: return "memory";
    case storage_backend_kind::redis: return "redis";
    case storage_backend_kind::redis_cluster: return "redis_cluster";
    case storage_backend_kind::file: return "file";
  }
  return "?";
}

std::optional<storage_backend_kind> parse_storage_backend_kind(const std::string& name) {
  for (storage_backend_kind k :
       {storage_backend_kind::model, storage_backend_kind::memory, storage_backend_kind::redis,
        storage_backend_kind::redis_cluster, storage_backend_kind::file})
    if (name == to_string(k))
      return k;
  return std::nullopt;
}

bool does_real_io(storage_backend_kind k) {
  return k == storage_backend_kind::redis || k == storage_backend_kind::redis_cluster ||
         k == storage_backend_kind::file;
}

std::unique_ptr<storage_backend> make_storage_backend(const backend_options& o) {
  if (o.kind == storage_backend_kind::model)
    return nullptr;
  // Payloads are megabytes each, allocated and freed by the thousand: kept in the heap rather than
  // mapped and unmapped one by one, they are not page-faulted in afresh (and zeroed) every time.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // A Redis node that dies while a command is being written to it must fail that write (EPIPE),
  // not stop the process (hiredis writes with write(2), which raises SIGPIPE on a closed socket).
  if (o.kind == storage_backend_kind::redis || o.kind == storage_backend_kind::redis_cluster)
    std::signal(SIGPIPE, SIG_IGN);
  switch (o.kind) {
    case storage_backend_kind::model: break;
    case storage_backend_kind::memory: return std::make_unique<memory_backend>(o.nodes);
    case storage_backend_kind::redis: return std::make_unique<redis_backend>(o);
    case storage_backend_kind::redis_cluster: return std::make_unique<redis_cluster_backend>(o);
    case storage_backend_kind::file: return std::make_unique<file_backend>(o);
  }
  return nullptr;
}

}  // namespace kvtier
