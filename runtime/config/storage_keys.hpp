#pragma once

// The storage.* config keys: the storage (L3) pool (capacity, nodes, media, backend, prefetch and
// eviction; docs/design.md). Read by replay_config.cpp and storage_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in storage_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::storage {

inline constexpr integer_key capacity_tokens{"storage.capacity_tokens"};
inline constexpr integer_key capacity_blocks{"storage.capacity_blocks"};
inline constexpr integer_key nodes{"storage.nodes"};
inline constexpr number_key read_gbps{"storage.read_gbps"};
inline constexpr number_key write_gbps{"storage.write_gbps"};
inline constexpr number_key op_latency_us{"storage.op_latency_us"};
inline constexpr number_key read_op_latency_us{"storage.read_op_latency_us"};
inline constexpr number_key stream_read_gbps{"storage.stream_read_gbps"};
inline constexpr number_key stream_write_gbps{"storage.stream_write_gbps"};
inline constexpr text_key calibration{"storage.calibration"};
inline constexpr text_key backend{"storage.backend"};
inline constexpr text_list_key redis{"storage.redis"};
inline constexpr integer_key redis_ttl_s{"storage.redis_ttl_s"};
inline constexpr text_list_key redis_cluster{"storage.redis_cluster"};
inline constexpr number_key redis_failover_wait_s{"storage.redis_failover_wait_s"};
inline constexpr text_key redis_user{"storage.redis_user"};
inline constexpr text_key redis_password_file{"storage.redis_password_file"};
inline constexpr boolean_key redis_tls{"storage.redis_tls"};
inline constexpr text_key redis_tls_ca_file{"storage.redis_tls_ca_file"};
inline constexpr text_key redis_tls_cert_file{"storage.redis_tls_cert_file"};
inline constexpr text_key redis_tls_key_file{"storage.redis_tls_key_file"};
inline constexpr text_key redis_tls_server_name{"storage.redis_tls_server_name"};
inline constexpr text_list_key file_dirs{"storage.file_dirs"};
inline constexpr boolean_key file_direct{"storage.file_direct"};
inline constexpr integer_key file_quota_bytes{"storage.file_quota_bytes"};
inline constexpr text_key prefetch_policy{"storage.prefetch_policy"};
inline constexpr integer_key prefetch_threshold_tokens{"storage.prefetch_threshold_tokens"};
inline constexpr number_key prefetch_timeout_ms{"storage.prefetch_timeout_ms"};
inline constexpr number_key prefetch_timeout_per_ki_token_ms{
  "storage.prefetch_timeout_per_ki_token_ms"};
inline constexpr integer_key prefetch_capacity_blocks{"storage.prefetch_capacity_blocks"};
inline constexpr integer_key payload_bytes{"storage.payload_bytes"};
inline constexpr integer_key max_inflight_bytes{"storage.max_inflight_bytes"};
inline constexpr text_key eviction{"storage.eviction"};
inline constexpr number_key high_watermark{"storage.high_watermark"};
inline constexpr number_key evict_fraction{"storage.evict_fraction"};
inline constexpr number_key lease_ms{"storage.lease_ms"};

}  // namespace keys::storage

/// The storage.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> storage_key_specs();

}  // namespace kvtier
