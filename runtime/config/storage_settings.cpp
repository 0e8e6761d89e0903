#include "runtime/config/storage_settings.hpp"

#include "core/time_math.hpp"
#include "runtime/config/redis_secrets.hpp"
#include "runtime/config/storage_calibration.hpp"
#include "storage/redis_backend.hpp"

namespace kvtier {

namespace {

// storage.redis_cluster: at least one seed, each host:port.
void check_cluster_seeds(const std::vector<std::string>& seeds) {
  if (seeds.empty())
    throw config_error("storage.redis_cluster: storage.backend=redis_cluster needs at least one "
                       "seed node (\"host:port\"); none given");
  for (const std::string& a : seeds) {
    try {
      parse_redis_address(a);
    } catch (const std::invalid_argument&) {
      throw config_error("storage.redis_cluster: '" + a + "': expected host:port");
    }
  }
}

// The modelled media, from the keys or a calibration file.
storage_options resolve_pool(const config& c, const replay_config& rc) {
  storage_options s;
  s.capacity_blocks = rc.storage_blocks;
  s.nodes = rc.storage_nodes;
  s.read_gbps = c.number(keys::storage::read_gbps);
  s.write_gbps = c.number(keys::storage::write_gbps);
  s.op_latency_ns = us_to_ns(c.number(keys::storage::op_latency_us));
  if (c.is_set(keys::storage::read_op_latency_us))
    s.read_op_latency_ns = us_to_ns(c.number(keys::storage::read_op_latency_us));
  s.stream_read_gbps = c.number(keys::storage::stream_read_gbps);
  s.stream_write_gbps = c.number(keys::storage::stream_write_gbps);
  if (c.is_set(keys::storage::calibration))
    apply_storage_calibration(c.text(keys::storage::calibration), s);
  s.name_space = rc.storage_namespace;
  s.pool = rc.storage_pool;
  return s;
}

// The storage.backend keys; a list that does not match storage.nodes is an error that says so.
backend_options resolve_backend(const config& c, const replay_config& rc) {
  backend_options b;
  b.kind = *parse_storage_backend_kind(c.text(keys::storage::backend));  // a checked choice
  b.ns = {rc.model.name, rc.model.kv_dtype};
  b.nodes = rc.storage_nodes;
  b.redis = c.text_list(keys::storage::redis);
  b.redis_ttl_s = static_cast<uint32_t>(c.integer(keys::storage::redis_ttl_s));
  b.redis_cluster = c.text_list(keys::storage::redis_cluster);
  if (b.kind == storage_backend_kind::redis || b.kind == storage_backend_kind::redis_cluster) {
    b.redis_auth = resolve_redis_access(c);
    if (c.is_set(keys::storage::redis_failover_wait_s))
      b.redis_failover_wait_ns =
        static_cast<int64_t>(c.number(keys::storage::redis_failover_wait_s) * 1e9);
  }
  b.file_dirs = c.text_list(keys::storage::file_dirs);
  b.file_direct = c.boolean(keys::storage::file_direct);
  b.file_quota_bytes = static_cast<uint64_t>(c.integer(keys::storage::file_quota_bytes));
  auto one_per_node = [&](text_list_key key, size_t n) {
    if (n == 0)
      throw config_error(std::string(key.name) + ": storage.backend=" + to_string(b.kind) +
                         " needs one entry per storage node; none given");
    if (n != rc.storage_nodes)
      throw config_error(std::string(key.name) + ": storage.backend=" + to_string(b.kind) +
                         " needs one entry per storage node: " + std::to_string(n) +
                         " given, storage.nodes is " + std::to_string(rc.storage_nodes) +
                         " (set storage.nodes=" + std::to_string(n) + ")");
  };
  switch (b.kind) {
    case storage_backend_kind::redis:
      one_per_node(keys::storage::redis, b.redis.size());
      for (const std::string& a : b.redis) {
        try {
          parse_redis_address(a);
        } catch (const std::invalid_argument& e) {
          throw config_error(e.what());
        }
      }
      break;
    case storage_backend_kind::redis_cluster: check_cluster_seeds(b.redis_cluster); break;
    case storage_backend_kind::file: one_per_node(keys::storage::file_dirs, b.file_dirs.size()); break;
    case storage_backend_kind::model:
    case storage_backend_kind::memory: break;
  }
  return b;
}

}  // namespace

storage_plan resolve_storage(const config& c, const replay_config& rc) {
  storage_plan s;
  s.pool = resolve_pool(c, rc);
  s.backend = resolve_backend(c, rc);
  if (s.backend.kind != storage_backend_kind::model)
    s.payload_bytes = c.is_set(keys::storage::payload_bytes)
                        ? static_cast<uint64_t>(c.integer(keys::storage::payload_bytes))
                        : rc.block_bytes();
  if (c.is_set(keys::storage::max_inflight_bytes))
    s.max_inflight_bytes = static_cast<uint64_t>(c.integer(keys::storage::max_inflight_bytes));
  return s;
}

}  // namespace kvtier
