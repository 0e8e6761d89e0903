#include "runtime/config/storage_keys.hpp"

namespace kvtier {

std::vector<option_spec> storage_key_specs() {
  return {
    {keys::storage::capacity_tokens, 0, 1e15, {}, true,
     "storage tier capacity in tokens, 0 = no storage tier; or set storage.capacity_blocks"},
    {keys::storage::capacity_blocks, 0, max_block_count, {}, true,
     "storage tier capacity in blocks, 0 = no storage tier; or set storage.capacity_tokens"},
    {keys::storage::nodes, 1, 1024, {}, false,
     "storage nodes; blocks are spread over them by hash, each node holds capacity / nodes"},
    {keys::storage::read_gbps, 0.001, 1e6, {}, false,
     "read bandwidth of each storage node's media, GB/s"},
    {keys::storage::write_gbps, 0.001, 1e6, {}, false,
     "write bandwidth of each storage node's media, GB/s"},
    {keys::storage::op_latency_us, 0, 1e9, {}, false,
     "latency of every storage request (put; exists and get too unless "
     "storage.read_op_latency_us is set), microseconds"},
    {keys::storage::read_op_latency_us, 0, 1e9, {}, true,
     "latency of a storage exists or get, microseconds (a file backend's get opens and reads, its "
     "put creates, writes and renames); null = storage.op_latency_us"},
    {keys::storage::stream_read_gbps, 0, 1e6, {}, false,
     "the most one block's read moves, GB/s (a request of k blocks on a node: k times that; "
     "the node's storage.read_gbps shared fairly above it); 0 = no cap"},
    {keys::storage::stream_write_gbps, 0, 1e6, {}, false,
     "the most one block's write moves, GB/s (as storage.stream_read_gbps); 0 = no cap"},
    {keys::storage::calibration, 0, 0, {}, true,
     "a file from `kvtier bench storage --emit-calibration`: its measured bandwidths and latencies "
     "replace storage.read_gbps, storage.write_gbps, storage.op_latency_us and (where measured) "
     "storage.read_op_latency_us, storage.stream_read_gbps and storage.stream_write_gbps"},
    {keys::storage::backend, 0, 0, {"model", "memory", "redis", "redis_cluster", "file"},
     false,
     "where stored blocks' bytes go: model = modelled media timing, no bytes; memory = this "
     "process (modelled timing); redis = one redis-server per node (storage.redis); "
     "redis_cluster = one Redis Cluster (storage.redis_cluster); file = one directory per node "
     "(storage.file_dirs). redis, redis_cluster and file do real I/O: --clock wall"},
    {keys::storage::redis, 0, 0, {}, false,
     "storage.backend=redis: \"host:port\" of each node's redis-server, one per storage node"},
    {keys::storage::redis_ttl_s, 0, 1e9, {}, false,
     "storage.backend=redis: expiry of stored blocks in seconds, 0 = none (the pool evicts)"},
    {keys::storage::redis_cluster, 0, 0, {}, false,
     "storage.backend=redis_cluster: \"host:port\" of seed nodes of one Redis Cluster (any of "
     "its nodes; the rest are found with CLUSTER SLOTS); the cluster places blocks by hash slot"},
    {keys::storage::redis_failover_wait_s, 0.1, 3600, {}, true,
     "storage.backend=redis_cluster: how long a command waits for a failed master's replica to "
     "take its slots before it fails (puts dropped, gets missed, deletes retried later), seconds; "
     "null = twice the cluster's own cluster-node-timeout (CONFIG GET at start) plus 5 s"},
    {keys::storage::redis_user, 0, 0, {}, true,
     "storage.backend=redis or redis_cluster: the ACL user kvtier authenticates as (AUTH user "
     "password); null = Redis's default user (AUTH password, for requirepass)"},
    {keys::storage::redis_password_file, 0, 0, {}, true,
     "storage.backend=redis or redis_cluster: a file holding the password (its first line); null "
     "= the environment variable KVTIER_REDIS_PASSWORD if set, else no AUTH. A password is never "
     "taken from the command line or a config, and never printed or written to an output"},
    {keys::storage::redis_tls, 0, 0, {}, false,
     "storage.backend=redis or redis_cluster: TLS to every node (Redis's tls-port), the server's "
     "certificate checked against storage.redis_tls_ca_file and its name"},
    {keys::storage::redis_tls_ca_file, 0, 0, {}, true,
     "storage.redis_tls: PEM certificates the servers' are checked against; null = the system's"},
    {keys::storage::redis_tls_cert_file, 0, 0, {}, true,
     "storage.redis_tls: PEM certificate kvtier presents (for servers with tls-auth-clients); "
     "null = none"},
    {keys::storage::redis_tls_key_file, 0, 0, {}, true,
     "storage.redis_tls: the PEM private key of storage.redis_tls_cert_file"},
    {keys::storage::redis_tls_server_name, 0, 0, {}, true,
     "storage.redis_tls: the name (or IP address) the servers' certificates must carry; null = "
     "each node's host as written in storage.redis / storage.redis_cluster"},
    {keys::storage::file_dirs, 0, 0, {}, false,
     "storage.backend=file: one directory per storage node"},
    {keys::storage::file_direct, 0, 0, {}, false,
     "storage.backend=file: O_DIRECT reads and writes (bypass the page cache)"},
    {keys::storage::file_quota_bytes, 0, 1e15, {}, false,
     "storage.backend=file: bytes each node's block files may hold; a write beyond fails as on a "
     "full disk (ENOSPC), 0 = no limit (a test hook for full-disk faults)"},
    {keys::storage::prefetch_policy, 0, 0,
     {"best_effort", "wait_complete", "timeout"}, false,
     "when a request whose storage prefetch is loading may be scheduled: at once, using what has "
     "landed by its admission (best_effort); once all landed (wait_complete); once all landed or "
     "storage.prefetch_timeout_ms plus storage.prefetch_timeout_per_ki_token_ms per 1024 tokens "
     "loaded passed (timeout). SGLang HiCache's stop policies"},
    {keys::storage::prefetch_threshold_tokens, 0, 1e12, {}, false,
     "a storage match shorter than this many tokens is not prefetched (computed instead)"},
    {keys::storage::prefetch_timeout_ms, 0, 1e9, {}, false,
     "storage.prefetch_policy=timeout: the base wait, milliseconds"},
    {keys::storage::prefetch_timeout_per_ki_token_ms, 0, 1e9, {}, false,
     "storage.prefetch_policy=timeout: the wait allowed per 1024 tokens loaded, milliseconds"},
    {keys::storage::prefetch_capacity_blocks, 0, max_block_count, {}, false,
     "blocks that landed prefetches may hold, prefix included, until their requests are admitted "
     "(protected from eviction); 0 = none: landed blocks are evictable at once"},
    {keys::storage::payload_bytes, 1, 1e12, {}, true,
     "bytes each stored block carries to a byte-carrying backend when no GPU runs (the block's "
     "hash pattern, checked on every read); null = the model's real bytes per block"},
    {keys::storage::max_inflight_bytes, 1, 1e15, {}, true,
     "byte-carrying backends: payload bytes the process may have in flight to and from storage; "
     "a store or load past it waits, as on a busy link to storage (reported as "
     "storage.backpressure); null = 1/32 of the machine's memory, between 256 MiB and 1 GiB"},
    {keys::storage::eviction, 0, 0, {"lru", "watermark"}, false,
     "how a full storage node makes room: lru = evict its least recently used unleased block; "
     "watermark = Mooncake Store's: once a node is fuller than storage.high_watermark, evict "
     "storage.evict_fraction of its capacity at once, LRU over unleased blocks"},
    {keys::storage::high_watermark, 0.01, 1, {}, false,
     "storage.eviction=watermark: share of a node's capacity above which it evicts "
     "(Mooncake: 0.9)"},
    {keys::storage::evict_fraction, 0.0001, 1, {}, false,
     "storage.eviction=watermark: share of a node's capacity one eviction batch frees (Mooncake: "
     "0.05)"},
    {keys::storage::lease_ms, 0, 1e9, {}, false,
     "a block matched by an exists is not evicted for this long, milliseconds (Mooncake: 10000); "
     "0 = no lease (a get still protects what it reads); full mode only"},
  };
}

}  // namespace kvtier
