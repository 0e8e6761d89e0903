#include "gpu/memory_fit.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace kvtier::gpu {

namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

const char* profiles = "use a GPU profile: --config configs/h100-80gb.json, configs/h200.json";

}  // namespace

std::optional<std::string> memory_refusal(const memory_ask& ask, const memory_free& free) {
  if (ask.device_bytes > free.device_bytes)
    return "the device tier needs " + gib(ask.device_bytes) + " of GPU memory and the GPU has "
           + gib(free.device_bytes) + " free: lower cache.device_tokens (or " + profiles + ")";
  if (free.host_bytes > 0 && ask.host_bytes > free.host_bytes)
    return "the host tier needs " + gib(ask.host_bytes) + " of pinned memory and the host has "
           + gib(free.host_bytes) + " available: lower cache.host_tokens (or " + profiles + ")";
  return std::nullopt;
}

std::optional<std::string> memory_warning(const memory_ask& ask, const memory_free& free) {
  if (free.host_bytes == 0 || ask.host_bytes <= host_warn_share * free.host_bytes)
    return std::nullopt;
  return "pinning " + gib(ask.host_bytes) + " of the host's " + gib(free.host_bytes)
         + " available leaves little to the rest of the host (cache.host_tokens)";
}

uint64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key;
    uint64_t kib = 0;
    if (words >> key >> kib && key == "MemAvailable:")
      return kib * 1024;
  }
  return 0;
}

}  // namespace kvtier::gpu
