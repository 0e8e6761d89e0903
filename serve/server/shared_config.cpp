#include "serve/server/shared_config.hpp"

#include <set>

namespace kvtier::serve {

namespace {

// The keys replaced by the block counts they resolve to.
const std::set<std::string> size_keys = {
  "cache.device_tokens", "cache.device_blocks", "cache.host_tokens", "cache.host_blocks",
  "storage.capacity_tokens", "storage.capacity_blocks"};

bool shared_key(const std::string& key) {
  for (const char* section : {"model.", "cache.", "storage.", "links."})
    if (key.rfind(section, 0) == 0)
      return size_keys.count(key) == 0;
  return key == "scheduler.preemption";
}

}  // namespace

config_values shared_config(const config& cfg, const replay_config& rc) {
  config_values out;
  nlohmann::json all = cfg.effective();
  for (const option_spec& spec : option_specs()) {
    std::string key(spec.key);
    if (!shared_key(key))
      continue;
    nlohmann::json::json_pointer at("/" + key.substr(0, key.find('.')) + "/"
                                    + key.substr(key.find('.') + 1));
    nlohmann::json value = all.contains(at) ? all.at(at) : nlohmann::json();
    // A number written 55 in one config and 55.0 in another is the same value.
    if (spec.type == option_type::number && value.is_number())
      value = value.get<double>();
    out.emplace_back(key, value.dump());
  }
  out.emplace_back("cache.device_blocks", std::to_string(rc.cache.device_blocks));
  out.emplace_back("cache.host_blocks", std::to_string(rc.cache.host_blocks));
  out.emplace_back("storage.capacity_blocks", std::to_string(rc.storage_blocks));
  return out;
}

std::optional<config_difference> first_difference(const config_values& theirs,
                                                  const config_values& ours) {
  for (const auto& [key, value] : theirs) {
    const std::string* mine = nullptr;
    for (const auto& [k, v] : ours)
      if (k == key)
        mine = &v;
    if (!mine)
      return config_difference{false, key, value, ""};
    if (*mine != value)
      return config_difference{true, key, value, *mine};
  }
  return std::nullopt;
}

}  // namespace kvtier::serve
