#include "sim/config/options.hpp"

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
  {"cache.storage_write", option_type::text, 0, 0, {"always", "on_host_evict", "never"}, false,
   "when host copies are written to storage"},
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
   "latency of every storage request (exists, get, put), microseconds"},
  // -- trace (timed replay) ----------------------------------------------------------------------
  {"trace.time_scale", option_type::number, 1e-6, 1e6, {}, false,
   "stretches the trace's recorded times (arrivals, think times): 4 = a quarter of the request "
   "rate, as one of four instances sharing a cluster's trace would see it"},
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
  // -- compute cost model (timed replay; actors/scheduler/cost_model.hpp) -------------------------
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
  // -- model -------------------------------------------------------------------------------------
  {"model.name", option_type::text, 0, 0, {}, false,
   "model name; part of every storage key, so different models never share blocks"},
  {"model.layers", option_type::integer, 1, 1024, {}, false, "transformer layers"},
  {"model.kv_heads", option_type::integer, 1, 1024, {}, false, "KV heads (per rank)"},
  {"model.head_dim", option_type::integer, 1, 4096, {}, false, "head dimension"},
  {"model.kv_dtype", option_type::text, 0, 0, {"bf16", "fp16", "fp8", "fp32"}, false,
   "KV cache element type; part of every storage key"},
};

std::string describe(const option_spec& s) {
  switch (s.type) {
    case option_type::integer: {
      std::ostringstream o;
      o << "an integer in [" << static_cast<long long>(s.min) << ", "
        << static_cast<long long>(s.max) << "]";
      return s.optional ? o.str() + " or null" : o.str();
    }
    case option_type::number: return "a number";
    case option_type::boolean: return "true or false";
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

std::string valid_keys_text() {
  std::string out;
  for (const auto& s : specs)
    out += std::string("  ") + s.key + " (" + describe(s) + "): " + s.help + "\n";
  return out;
}

config::config() : values_(specs.size()), sources_(specs.size()) {
  json defaults = json::parse(default_config_json);
  merge_json(defaults, "configs/default.json");
  for (size_t i = 0; i < specs.size(); ++i)
    if (!specs[i].optional && values_[i].is_null())
      throw config_error(std::string("configs/default.json lacks ") + specs[i].key);
}

void config::merge_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw config_error(path + ": cannot open config file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // a syntax error, or a number out of double's range
    throw config_error(path + ": not valid JSON: " + e.what());
  }
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
      if (std::floor(d) != d || d < s.min || d > s.max)
        throw bad();
      values_[i] = static_cast<int64_t>(d);
      return;
    }
    case option_type::number:
      if (!value.is_number())
        throw bad();
      if (value.get<double>() < s.min || value.get<double>() > s.max)
        throw bad();
      values_[i] = value.get<double>();
      return;
    case option_type::boolean:
      if (!value.is_boolean())
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
