#pragma once

// Before the real backend allocates its tiers: do they fit the GPU's free memory and the host's
// available memory? The default config describes an instance larger than one H100 (docs/gpu.md
// "GPU profiles"); allocating it would fail after a long pinning, or push the host into the OOM
// killer, so the cache refuses up front and says which key to lower. A host pool that leaves
// little memory to the rest of the host only warns.

#include <cstdint>
#include <optional>
#include <string>

namespace kvtier::gpu {

struct memory_ask {
  uint64_t device_bytes = 0;  ///< KV tensors and staging slots
  uint64_t host_bytes = 0;    ///< pinned host KV blocks
};

struct memory_free {
  uint64_t device_bytes = 0;  ///< cudaMemGetInfo's free
  uint64_t host_bytes = 0;    ///< /proc/meminfo MemAvailable (0: unknown, not checked)
};

/// Pinning more than this share of the host's available memory warns.
inline constexpr double host_warn_share = 0.9;

/// Why the tiers cannot be allocated, naming the keys to lower; nullopt when they fit.
std::optional<std::string> memory_refusal(const memory_ask& ask, const memory_free& free);
/// A warning when the host pool leaves little of the host's memory; nullopt otherwise.
std::optional<std::string> memory_warning(const memory_ask& ask, const memory_free& free);

/// MemAvailable of /proc/meminfo in bytes (0 when it cannot be read).
uint64_t host_available_bytes();

}  // namespace kvtier::gpu
