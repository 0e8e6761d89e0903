#pragma once

// The cache.* config keys: the device and host tiers (capacities, eviction, and when blocks are
// copied down the tiers; docs/design.md). Read by replay_config.cpp and instance_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in cache_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::cache {

inline constexpr integer_key block_size{"cache.block_size"};
inline constexpr integer_key device_tokens{"cache.device_tokens"};
inline constexpr integer_key device_blocks{"cache.device_blocks"};
inline constexpr integer_key host_tokens{"cache.host_tokens"};
inline constexpr integer_key host_blocks{"cache.host_blocks"};
inline constexpr text_key eviction{"cache.eviction"};
inline constexpr text_key write_policy{"cache.write_policy"};
inline constexpr integer_key write_through_threshold{"cache.write_through_threshold"};
inline constexpr text_key storage_write{"cache.storage_write"};
inline constexpr integer_key storage_write_threshold{"cache.storage_write_threshold"};
inline constexpr boolean_key output_caching{"cache.output_caching"};
inline constexpr text_key write_back_host_copy{"cache.write_back_host_copy"};
inline constexpr boolean_key prefix_caching{"cache.prefix_caching"};

}  // namespace keys::cache

/// The cache.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> cache_key_specs();

}  // namespace kvtier
