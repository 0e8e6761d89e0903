#pragma once

// What a byte-carrying backend's nodes can hold, asked before a run starts (the pre-start check in
// runtime/storage_check.cpp compares it with the pool's capacity; docs/design.md "Room for the
// pool").

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/redis_access.hpp"

namespace kvtier {

/// A redis-server's memory settings (INFO memory, CONFIG GET maxmemory-policy).
struct redis_memory {
  uint64_t maxmemory = 0;    ///< 0: no limit
  uint64_t used_memory = 0;
  std::string policy;        ///< maxmemory-policy; empty if the server would not say
};

/// Asks the redis-server at `address` ("host:port"), authenticated and encrypted as `access`
/// says; nullopt if it cannot be reached or answers something else.
std::optional<redis_memory> redis_memory_of(const std::string& address,
                                            const redis_access& access = {});

/// The masters serving a Redis Cluster's slots, asked of the first of `seeds` that answers
/// (CLUSTER SLOTS); empty if none does.
std::vector<std::string> redis_cluster_masters(const std::vector<std::string>& seeds,
                                               const redis_access& access = {});

/// Whether `address` names this machine (loopback, localhost): a server without maxmemory there
/// shares this machine's memory with kvtier.
bool is_local_address(const std::string& address);

/// Bytes free to an unprivileged writer on the file system holding `dir` (nullopt: unknown).
std::optional<uint64_t> free_disk_bytes(const std::string& dir);

}  // namespace kvtier
