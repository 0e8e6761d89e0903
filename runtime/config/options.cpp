#include "runtime/config/options.hpp"

#include "runtime/config/strict_json.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace kvtier {

extern const char* const default_config_json;  // configs/default.json, generated at build time

namespace {

using nlohmann::json;

constexpr double max_u32 = 4294967295.0;

const std::vector<option_spec> specs = {
  // -- cache tiers -------------------------------------------------------------------------------
  {"cache.block_size", option_type::integer, 1, 32768, {}, false,
   "tokens per cache block; trace blocks map onto whole cache blocks"},
  {"cache.device_tokens", option_type::integer, 0, 1e15, {}, true,
   "device (GPU) tier capacity in tokens (rounded down to blocks); or set cache.device_blocks"},
  {"cache.device_blocks", option_type::integer, 0, max_u32, {}, true,
   "device (GPU) tier capacity in blocks; or set cache.device_tokens"},
  {"cache.host_tokens", option_type::integer, 0, 1e15, {}, true,
   "host (pinned DRAM) tier capacity in tokens, 0 = no host tier; or set cache.host_blocks"},
  {"cache.host_blocks", option_type::integer, 0, max_u32, {}, true,
   "host tier capacity in blocks, 0 = no host tier; or set cache.host_tokens"},
  {"cache.eviction", option_type::text, 0, 0, {"lru", "lfu"}, false,
   "eviction order of each tier's unreferenced leaf blocks"},
  {"cache.write_policy", option_type::text, 0, 0,
   {"write_through", "write_through_selective", "write_back"}, false,
   "when device blocks get a host copy"},
  {"cache.write_through_threshold", option_type::integer, 1, 1e9, {}, false,
   "hits a block needs before write_through_selective backs it up (write_through uses 1)"},
  {"cache.storage_write", option_type::text, 0, 0,
   {"always", "write_through_selective", "on_host_evict", "never"}, false,
   "when host copies are written to storage: always (once the host copy is ready), "
   "write_through_selective (once the block has cache.storage_write_threshold hits), "
   "on_host_evict, never"},
  {"cache.storage_write_threshold", option_type::integer, 1, 1e9, {}, false,
   "cache.storage_write=write_through_selective: hits a block needs before it is written to "
   "storage (1 for the request that computed it, +1 per prefix match)"},
  {"cache.output_caching", option_type::boolean, 0, 0, {}, false,
   "decode and mixed instances write each finished request's prompt and output blocks to "
   "storage before freeing them, so other instances hit on them (FastDeploy "
   "--enable-output-caching); output blocks go under keys of their own, as traces name no "
   "generated tokens"},
  {"cache.write_back_host_copy", option_type::text, 0, 0, {"free_on_swap_in", "keep"}, false,
   "write_back: a swapped-in block's host copy is freed (FastDeploy; the block is written back "
   "again at its next eviction) or kept (SGLang HiCache; each block is written back once)"},
  // -- storage (L3) ------------------------------------------------------------------------------
  {"storage.capacity_tokens", option_type::integer, 0, 1e15, {}, true,
   "storage tier capacity in tokens, 0 = no storage tier; or set storage.capacity_blocks"},
  {"storage.capacity_blocks", option_type::integer, 0, max_u32, {}, true,
   "storage tier capacity in blocks, 0 = no storage tier; or set storage.capacity_tokens"},
  {"storage.nodes", option_type::integer, 1, 1024, {}, false,
   "storage nodes; blocks are spread over them by hash, each node holds capacity / nodes"},
  {"storage.read_gbps", option_type::number, 0.001, 1e6, {}, false,
   "read bandwidth of each storage node's media, GB/s"},
  {"storage.write_gbps", option_type::number, 0.001, 1e6, {}, false,
   "write bandwidth of each storage node's media, GB/s"},
  {"storage.op_latency_us", option_type::number, 0, 1e9, {}, false,
   "latency of every storage request (put; exists and get too unless "
   "storage.read_op_latency_us is set), microseconds"},
  {"storage.read_op_latency_us", option_type::number, 0, 1e9, {}, true,
   "latency of a storage exists or get, microseconds (a file backend's get opens and reads, its "
   "put creates, writes and renames); null = storage.op_latency_us"},
  {"storage.stream_read_gbps", option_type::number, 0, 1e6, {}, false,
   "the most one block's read moves, GB/s (a request of k blocks on a node: k times that; "
   "the node's storage.read_gbps shared fairly above it); 0 = no cap"},
  {"storage.stream_write_gbps", option_type::number, 0, 1e6, {}, false,
   "the most one block's write moves, GB/s (as storage.stream_read_gbps); 0 = no cap"},
  {"storage.calibration", option_type::text, 0, 0, {}, true,
   "a file from `kvtier bench storage --emit-calibration`: its measured bandwidths and latencies "
   "replace storage.read_gbps, storage.write_gbps, storage.op_latency_us and (where measured) "
   "storage.read_op_latency_us, storage.stream_read_gbps and storage.stream_write_gbps"},
  {"storage.backend", option_type::text, 0, 0, {"model", "memory", "redis", "file"}, false,
   "where stored blocks' bytes go: model = modelled media timing, no bytes; memory = this "
   "process (modelled timing); redis = one redis-server per node (storage.redis); file = one "
   "directory per node (storage.file_dirs). redis and file do real I/O: --clock wall"},
  {"storage.redis", option_type::text_list, 0, 0, {}, false,
   "storage.backend=redis: \"host:port\" of each node's redis-server, one per storage node"},
  {"storage.redis_ttl_s", option_type::integer, 0, 1e9, {}, false,
   "storage.backend=redis: expiry of stored blocks in seconds, 0 = none (the pool evicts)"},
  {"storage.file_dirs", option_type::text_list, 0, 0, {}, false,
   "storage.backend=file: one directory per storage node"},
  {"storage.file_direct", option_type::boolean, 0, 0, {}, false,
   "storage.backend=file: O_DIRECT reads and writes (bypass the page cache)"},
  {"storage.file_quota_bytes", option_type::integer, 0, 1e15, {}, false,
   "storage.backend=file: bytes each node's block files may hold; a write beyond fails as on a "
   "full disk (ENOSPC), 0 = no limit (a test hook for full-disk faults)"},
  {"storage.prefetch_policy", option_type::text, 0, 0,
   {"best_effort", "wait_complete", "timeout"}, false,
   "when a request whose storage prefetch is loading may be scheduled: at once, using what has "
   "landed by its admission (best_effort); once all landed (wait_complete); once all landed or "
   "storage.prefetch_timeout_ms plus storage.prefetch_timeout_per_ki_token_ms per 1024 tokens "
   "loaded passed (timeout). SGLang HiCache's stop policies"},
  {"storage.prefetch_threshold_tokens", option_type::integer, 0, 1e12, {}, false,
   "a storage match shorter than this many tokens is not prefetched (computed instead)"},
  {"storage.prefetch_timeout_ms", option_type::number, 0, 1e9, {}, false,
   "storage.prefetch_policy=timeout: the base wait, milliseconds"},
  {"storage.prefetch_timeout_per_ki_token_ms", option_type::number, 0, 1e9, {}, false,
   "storage.prefetch_policy=timeout: the wait allowed per 1024 tokens loaded, milliseconds"},
  {"storage.prefetch_capacity_blocks", option_type::integer, 0, max_u32, {}, false,
   "blocks that landed prefetches may hold, prefix included, until their requests are admitted "
   "(protected from eviction); 0 = none: landed blocks are evictable at once"},
  {"storage.payload_bytes", option_type::integer, 1, 1e12, {}, true,
   "bytes each stored block carries to a byte-carrying backend when no GPU runs (the block's "
   "hash pattern, checked on every read); null = the model's real bytes per block"},
  {"storage.eviction", option_type::text, 0, 0, {"lru", "watermark"}, false,
   "how a full storage node makes room: lru = evict its least recently used unleased block; "
   "watermark = Mooncake Store's: once a node is fuller than storage.high_watermark, evict "
   "storage.evict_fraction of its capacity at once, LRU over unleased blocks"},
  {"storage.high_watermark", option_type::number, 0.01, 1, {}, false,
   "storage.eviction=watermark: share of a node's capacity above which it evicts (Mooncake: 0.9)"},
  {"storage.evict_fraction", option_type::number, 0.0001, 1, {}, false,
   "storage.eviction=watermark: share of a node's capacity one eviction batch frees (Mooncake: "
   "0.05)"},
  {"storage.lease_ms", option_type::number, 0, 1e9, {}, false,
   "a block matched by an exists is not evicted for this long, milliseconds (Mooncake: 10000); "
   "0 = no lease (a get still protects what it reads); full mode only"},
  // -- trace (timed replay) ----------------------------------------------------------------------
  {"trace.time_scale", option_type::number, 1e-6, 1e6, {}, false,
   "stretches the trace's recorded times (arrivals, think times): 4 = a quarter of the request "
   "rate, as one of four instances sharing a cluster's trace would see it"},
  {"trace.max_line_bytes", option_type::integer, 1024, 4294967296.0, {}, false,
   "longest trace line read, in bytes: a longer one is an error before it is buffered whole"},
  {"trace.max_document_bytes", option_type::integer, 1024, 68719476736.0, {}, false,
   "largest agentic JSON document read, in bytes (it is read whole)"},
  {"trace.max_blocks_per_request", option_type::integer, 1, max_u32, {}, false,
   "cache blocks one request may cover (ceil(input tokens / cache.block_size)), at most: a larger "
   "request is an error before its blocks are built"},
  // -- scheduler (timed replay) ------------------------------------------------------------------
  {"scheduler.max_num_seqs", option_type::integer, 1, 1e6, {}, false,
   "requests running at once, at most"},
  {"scheduler.token_budget", option_type::integer, 1, 1e9, {}, false,
   "tokens per step (prefill chunks and decode tokens together): chunked prefill"},
  {"scheduler.reserve_output_blocks", option_type::number, 0, 1e6, {}, false,
   "blocks kept free per running request when admitting (FastDeploy, decays each step)"},
  {"scheduler.reserve_decay", option_type::number, 0, 1e6, {}, false,
   "decay of that reserve per non-empty step"},
  {"scheduler.reserve_min", option_type::integer, 0, 1e6, {}, false, "floor of that reserve"},
  {"scheduler.probe_limit", option_type::integer, 1, 1e6, {}, false,
   "waiting requests matched against the cache per step, at most"},
  {"scheduler.preemption", option_type::text, 0, 0,
   {"recompute", "save_to_storage", "swap_to_host"}, false,
   "what a preempted request's computed blocks become: released and recomputed where the cache "
   "lost them (recompute); copied to host and written to storage before they are freed, found "
   "there at re-admission (save_to_storage, needs a storage tier); copied to host and swapped "
   "back in at re-admission (swap_to_host, needs a host tier). docs/preemption.md"},
  // -- compute cost model (timed replay; model/scheduler/cost_model.hpp) -------------------------
  {"compute.step_overhead_us", option_type::number, 0, 1e9, {}, false,
   "fixed time of every step: weights streamed, kernels launched, tokens sampled"},
  {"compute.prefill_token_us", option_type::number, 0, 1e9, {}, false,
   "dense compute per prefill token, microseconds"},
  {"compute.prefill_attention_ns", option_type::number, 0, 1e9, {}, false,
   "attention per prefill token per context token, nanoseconds"},
  {"compute.decode_token_us", option_type::number, 0, 1e9, {}, false,
   "dense compute per decode sequence, microseconds"},
  {"compute.decode_context_ns", option_type::number, 0, 1e9, {}, false,
   "KV reading per decode sequence per context token, nanoseconds"},
  // -- links (timed replay; actors/transfer_engine/transfer_engine.hpp) ---------------------------
  {"links.h2d_gbps", option_type::number, 0.001, 1e6, {}, false, "PCIe host to device, GB/s"},
  {"links.d2h_gbps", option_type::number, 0.001, 1e6, {}, false, "PCIe device to host, GB/s"},
  {"links.duplex_gbps", option_type::number, 0.001, 1e6, {}, false,
   "PCIe both directions together, GB/s"},
  {"links.h2d_layer_latency_us", option_type::number, 0, 1e9, {}, false,
   "fixed cost of each layer of a swap-in, microseconds"},
  {"links.d2h_latency_us", option_type::number, 0, 1e9, {}, false,
   "fixed cost of each device-to-host transfer, microseconds"},
  {"links.calibration", option_type::text, 0, 0, {}, true,
   "a file from `kvtier bench transfer --emit-calibration`: its measured PCIe bandwidths and "
   "latencies replace links.h2d_*, links.d2h_* and links.duplex_gbps"},
  {"links.nic_gbps", option_type::number, 0.001, 1e6, {}, false,
   "host network link to storage, GB/s"},
  {"links.nic_latency_us", option_type::number, 0, 1e9, {}, false,
   "fixed cost of each storage transfer over the network, microseconds"},
  {"links.pd_gbps", option_type::number, 0.001, 1e6, {}, false,
   "PD, pd.transfer = direct: each prefill instance's KV send link to decode instances (RDMA), "
   "GB/s"},
  {"links.pd_latency_us", option_type::number, 0, 1e9, {}, false,
   "PD, pd.transfer = direct: fixed cost of each layer sent over the PD link, microseconds"},
  // -- deployment (timed replay) -----------------------------------------------------------------
  {"cluster.instances", option_type::list, 0, 0, {}, false,
   "the instances sharing the storage pool: a list of {\"role\": \"mixed\", \"count\": n, "
   "\"overrides\": {key: value}}, overrides of cache.*, scheduler.*, compute.* and links.* keys "
   "for that group (docs/cluster.md)"},
  {"router.policy", option_type::text, 0, 0, {"round_robin", "least_loaded", "cache_aware"},
   false,
   "which instance a request goes to: in turn, the fewest requests in flight, or the best "
   "prefix hit against queued work (docs/cluster.md gives the score)"},
  {"router.session_affinity", option_type::boolean, 0, 0, {}, false,
   "keep every turn of a session (agentic, multi-turn) on the instance of its first turn"},
  {"router.load_weight", option_type::number, 0, 1e6, {}, false,
   "cache_aware: what one prompt token in flight on an instance costs against one uncached "
   "token of the request"},
  // -- prefill/decode disaggregation (docs/cluster.md) -------------------------------------------
  {"pd.transfer", option_type::text, 0, 0, {"direct", "storage"}, false,
   "how a prefill instance hands a request's KV cache to its decode instance: streamed layer by "
   "layer over the PD link (direct), or written to the storage pool and read back (storage)"},
  {"pd.wait_decode_resource_s", option_type::number, 0, 1e6, {}, false,
   "how long a prefill waits for a decode instance to preallocate the request's blocks before "
   "the request fails (FD_PREFILL_WAIT_DECODE_RESOURCE_SECONDS)"},
  {"pd.retry_decode_resource", option_type::boolean, 0, 0, {}, false,
   "ask decode instances again every pd.retry_interval_ms instead of failing after "
   "pd.wait_decode_resource_s (PREFILL_CONTINUOUS_REQUEST_DECODE_RESOURCES)"},
  {"pd.retry_interval_ms", option_type::number, 0.001, 1e6, {}, false,
   "pd.retry_decode_resource: milliseconds between two preallocation requests"},
  {"pd.on_handoff_failure", option_type::text, 0, 0, {"error", "recompute"}, false,
   "a handoff whose KV never arrives whole: the request fails (FastDeploy's error 500), or the "
   "decode instance computes the prompt itself"},
  {"pd.failure_rate", option_type::number, 0, 1, {}, false,
   "probability that a handoff fails (seeded fault injection, drawn from --seed per request)"},
  // -- faults (full mode, virtual clock; drawn from --seed; docs/faults.md) ---------------------
  {"faults.node_loss_at_s", option_type::number, 0, 1e9, {}, true,
   "a storage node (faults.node_loss_node) is lost at this virtual time, seconds: its blocks are "
   "gone, it comes back empty after faults.down_s; null = none"},
  {"faults.node_loss_node", option_type::integer, 0, 1023, {}, false,
   "the node faults.node_loss_at_s loses (below storage.nodes)"},
  {"faults.node_losses_per_hour", option_type::number, 0, 1e9, {}, false,
   "storage node losses per hour of virtual time over the pool, at random times and nodes "
   "drawn from --seed; 0 = none"},
  {"faults.down_s", option_type::number, 0, 1e9, {}, false,
   "how long a lost storage node stays down before it comes back empty, seconds"},
  {"faults.slow_link_at_s", option_type::number, 0, 1e9, {}, true,
   "a storage node's links (faults.slow_link_node) slow down at this virtual time, seconds; "
   "null = none"},
  {"faults.slow_link_node", option_type::integer, 0, 1023, {}, false,
   "the node whose links faults.slow_link_at_s slows (below storage.nodes)"},
  {"faults.slow_links_per_hour", option_type::number, 0, 1e9, {}, false,
   "slow-link windows per hour of virtual time, at random times and nodes drawn from --seed"},
  {"faults.slow_link_s", option_type::number, 0, 1e9, {}, false,
   "how long a slow-link window lasts, seconds"},
  {"faults.slow_link_factor", option_type::number, 1e-6, 1, {}, false,
   "a slow link's bandwidth, as a share of its configured bandwidth"},
  {"faults.get_fail_probability", option_type::number, 0, 1, {}, false,
   "chance that a storage get fails to read a block (drawn per block from --seed): the load "
   "fails and the request recomputes those tokens"},
  {"faults.put_fail_probability", option_type::number, 0, 1, {}, false,
   "chance that a storage put fails to write a block (drawn per block from --seed): the write is "
   "rolled back and no key is left"},
  // -- live controller (kvtier serve, docs/protocol.md) --------------------------------------------
  {"serve.client_timeout_s", option_type::number, 0.01, 86400, {}, false,
   "kvtier serve: an engine silent this long is dropped and every request it holds released"},
  {"serve.max_message_bytes", option_type::integer, 256, 1073741824.0, {}, false,
   "kvtier serve: longest call accepted, in bytes (a longer one is answered too_large undecoded)"},
  {"serve.events_topic", option_type::text, 0, 0, {}, false,
   "kvtier serve --events: the topic frame of every KV event message (docs/events.md)"},
  {"serve.events_buffer", option_type::integer, 1, 10000000, {}, false,
   "kvtier serve --events: KV event batches the replay socket keeps for subscribers that missed them"},
  {"serve.events_hwm", option_type::integer, 1, 100000000, {}, false,
   "kvtier serve --events: messages the PUB socket queues per subscriber before dropping"},
  // -- model -------------------------------------------------------------------------------------
  {"model.name", option_type::text, 0, 0, {}, false,
   "model name; part of every storage key, so different models never share blocks"},
  {"model.layers", option_type::integer, 1, 1024, {}, false, "transformer layers"},
  {"model.kv_heads", option_type::integer, 1, 1024, {}, false, "KV heads (per rank)"},
  {"model.head_dim", option_type::integer, 1, 4096, {}, false, "head dimension"},
  {"model.kv_dtype", option_type::text, 0, 0, {"bf16", "fp16", "fp8", "fp32"}, false,
   "KV cache element type; part of every storage key"},
};

// 1e-06 -> 1e-6, 1e+06 -> 1e6, 0.001 -> 0.001: short and exact for the bounds in the table.
std::string number_text(double x) {
  std::ostringstream o;
  o << x;
  std::string t = o.str();
  auto e = t.find('e');
  if (e == std::string::npos)
    return t;
  std::string mantissa = t.substr(0, e), exponent = t.substr(e + 1);
  bool negative = exponent[0] == '-';
  size_t digits = exponent.find_first_not_of("+-0");
  return mantissa + "e" + (negative ? "-" : "") +
         (digits == std::string::npos ? "0" : exponent.substr(digits));
}

std::string describe(const option_spec& s) {
  switch (s.type) {
    case option_type::integer: {
      std::ostringstream o;
      o << "an integer in [" << static_cast<long long>(s.min) << ", "
        << static_cast<long long>(s.max) << "]";
      return s.optional ? o.str() + " or null" : o.str();
    }
    case option_type::number:
      return "a number in [" + number_text(s.min) + ", " + number_text(s.max) + "]" +
             (s.optional ? " or null" : "");
    case option_type::boolean: return "true or false";
    case option_type::list: return "a JSON list";
    case option_type::text_list: return "a list of strings";
    case option_type::text: {
      if (s.choices.empty())
        return "a string";
      std::string c = "one of";
      for (size_t i = 0; i < s.choices.size(); ++i)
        c += std::string(i ? ", " : " ") + s.choices[i];
      return c;
    }
  }
  return "?";
}

// Pairs of keys that give one capacity in two units: setting one clears the other, so an override
// in blocks replaces a default in tokens. One source setting both is an error.
const std::vector<std::pair<std::string, std::string>> unit_pairs = {
  {"cache.device_tokens", "cache.device_blocks"},
  {"cache.host_tokens", "cache.host_blocks"},
  {"storage.capacity_tokens", "storage.capacity_blocks"},
};

size_t index_of(const std::string& key) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (key == specs[i].key)
      return i;
  throw config_error("unknown config key '" + key + "'; valid keys:\n" + valid_keys_text());
}

void flatten(const json& j, const std::string& prefix, std::vector<std::pair<std::string, json>>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flatten(*it, key, out);
    else
      out.emplace_back(key, *it);
  }
}

}  // namespace

const std::vector<option_spec>& option_specs() {
  return specs;
}

const option_spec& option_spec_of(const std::string& key) {
  return specs[index_of(key)];
}

std::string expected_value_text(const option_spec& spec) {
  return describe(spec);
}

std::string valid_keys_text() {
  std::string out;
  for (const auto& s : specs)
    out += std::string("  ") + s.key + " (" + describe(s) + "): " + s.help + "\n";
  return out;
}

config::config() : values_(specs.size()), sources_(specs.size()) {
  // The defaults are parsed once per process and copied after: a sweep builds a config per cell,
  // and parsing them was most of a config's cost.
  static const config* const defaults = [] {
    static config built(nullptr);
    built.merge_json(parse_json_strict(default_config_json, "configs/default.json"),
                     "configs/default.json");
    for (size_t i = 0; i < specs.size(); ++i)
      if (!specs[i].optional && built.values_[i].is_null())
        throw config_error(std::string("configs/default.json lacks ") + specs[i].key);
    return &built;
  }();
  values_ = defaults->values_;
  sources_ = defaults->sources_;
}

config::config(std::nullptr_t) : values_(specs.size()), sources_(specs.size()) {}

void config::merge_file(const std::string& path) {
  json j = read_json_file(path, "config file");
  if (!j.is_object())
    throw config_error(path + ": expected a JSON object of config keys");
  merge_json(j, path);
}

void config::merge_json(const json& j, const std::string& source) {
  std::vector<std::pair<std::string, json>> flat;
  flatten(j, "", flat);
  for (auto& [key, value] : flat)
    assign(key, value, source);
}

void config::set(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw config_error("--set " + assignment + ": expected key=value");
  std::string key = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded())
    value = text;  // plain text such as write_back
  assign(key, value, "--set " + assignment);
}

void config::assign(const std::string& key, const json& value, const std::string& source) {
  size_t i;
  try {
    i = index_of(key);
  } catch (const config_error& e) {
    throw config_error(source + ": " + e.what());
  }
  const option_spec& s = specs[i];
  auto bad = [&] {
    // Replacing bad UTF-8: a --set value is any bytes the shell passed.
    return config_error(source + ": " + key + ": expected " + describe(s) + ", got "
                        + value.dump(-1, ' ', false, json::error_handler_t::replace));
  };
  if (value.is_null()) {
    if (!s.optional)
      throw bad();
    values_[i] = nullptr;
    return;
  }
  for (const auto& [a, b] : unit_pairs) {
    if (key != a && key != b)
      continue;
    size_t partner = index_of(key == a ? b : a);
    if (!values_[partner].is_null() && sources_[partner] == source)
      throw config_error(source + ": set only one of " + a + " and " + b);
    values_[partner] = nullptr;
  }
  sources_[i] = source;
  switch (s.type) {
    case option_type::integer: {
      if (!value.is_number())
        throw bad();
      double d = value.get<double>();
      if (!std::isfinite(d) || std::floor(d) != d || d < s.min || d > s.max)
        throw bad();
      values_[i] = static_cast<int64_t>(d);
      return;
    }
    case option_type::number:
      if (!value.is_number())
        throw bad();
      // NaN compares false with every bound: refuse it (and infinities) by name.
      if (!std::isfinite(value.get<double>()) || value.get<double>() < s.min ||
          value.get<double>() > s.max)
        throw bad();
      values_[i] = value.get<double>();
      return;
    case option_type::boolean:
      if (!value.is_boolean())
        throw bad();
      values_[i] = value;
      return;
    case option_type::list:
      if (!value.is_array())
        throw bad();
      values_[i] = value;
      return;
    case option_type::text_list:
      if (!value.is_array())
        throw bad();
      for (const auto& e : value)
        if (!e.is_string() || e.get_ref<const std::string&>().empty())
          throw bad();
      values_[i] = value;
      return;
    case option_type::text: {
      if (!value.is_string())
        throw bad();
      // summary.json and `kvtier config` print every value: text must be valid UTF-8.
      try {
        (void)value.dump();
      } catch (const json::type_error&) {
        throw config_error(source + ": " + key + ": expected text in UTF-8, got " +
                           value.dump(-1, ' ', false, json::error_handler_t::replace));
      }
      const std::string& t = value.get_ref<const std::string&>();
      bool allowed = s.choices.empty();
      for (const char* c : s.choices)
        allowed = allowed || t == c;
      if (!allowed)
        throw bad();
      values_[i] = value;
      return;
    }
  }
}

const json& config::value(const std::string& key) const {
  const json& v = values_[index_of(key)];
  if (v.is_null())
    throw config_error(key + " is not set");
  return v;
}

bool config::is_set(const std::string& key) const {
  return !values_[index_of(key)].is_null();
}

int64_t config::integer(const std::string& key) const {
  return value(key).get<int64_t>();
}

double config::number(const std::string& key) const {
  return value(key).get<double>();
}

const std::string& config::text(const std::string& key) const {
  return value(key).get_ref<const std::string&>();
}

bool config::boolean(const std::string& key) const {
  return value(key).get<bool>();
}

const json& config::list(const std::string& key) const {
  return value(key);
}

std::vector<std::string> config::text_list(const std::string& key) const {
  return value(key).get<std::vector<std::string>>();
}

json config::effective() const {
  json out = json::object();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string key = specs[i].key;
    json* node = &out;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
      node = &(*node)[key.substr(start, dot - start)];
    (*node)[key.substr(start)] = values_[i];
  }
  return out;
}

}  // namespace kvtier
