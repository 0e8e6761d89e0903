#include "gpu/kv_cache.hpp"

namespace kvtier::gpu {

namespace {

constexpr transfer_method all_methods[] = {
  transfer_method::automatic, transfer_method::per_chunk, transfer_method::batched,
  transfer_method::staging,   transfer_method::zero_copy,
};

}  // namespace

const char* to_string(transfer_method m) {
  switch (m) {
    case transfer_method::automatic:
      return "automatic";
    case transfer_method::per_chunk:
      return "per_chunk";
    case transfer_method::batched:
      return "batched";
    case transfer_method::staging:
      return "staging";
    case transfer_method::zero_copy:
      return "zero_copy";
  }
  return "?";
}

std::optional<transfer_method> parse_transfer_method(std::string_view name) {
  for (transfer_method m : all_methods)
    if (name == to_string(m))
      return m;
  return std::nullopt;
}

transfer_method default_method(transfer_direction) {
  return transfer_method::staging;
}

std::optional<std::string> check_config(const kv_cache_config& config) {
  if (auto err = check_shape(config.shape, config.block_size))
    return err;
  if (config.device_blocks == 0)
    return std::string("it needs at least one device block");
  if (config.staging_slots == 0 || config.zero_copy_ctas == 0)
    return std::string("staging_slots and zero_copy_ctas must be positive");
  if (config.memory == device_memory::attached && config.attach.size() != config.shape.layers)
    return "attaching an engine's tensors needs one handle per layer: got "
           + std::to_string(config.attach.size()) + " for " + std::to_string(config.shape.layers)
           + " layers";
  if (config.memory != device_memory::attached && !config.attach.empty())
    return std::string("tensor handles are given only to attach another process's tensors");
  return std::nullopt;
}

}  // namespace kvtier::gpu
