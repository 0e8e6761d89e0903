#include "runtime/config/cluster_config.hpp"

#include <algorithm>
#include <map>

namespace kvtier {

namespace {

using nlohmann::json;

constexpr uint64_t max_instances = 1024;

// What a group may override: the settings of one instance, never the model or the shared pool.
bool overridable(const std::string& key) {
  for (const char* prefix : {"cache.", "scheduler.", "compute.", "links."})
    if (key.rfind(prefix, 0) == 0)
      return true;
  return false;
}

void flat_keys(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flat_keys(*it, key, out);
    else
      out.push_back(key);
  }
}

pd_role role_of(const json& v, const std::string& where) {
  if (v.is_string())
    for (pd_role r : {pd_role::mixed, pd_role::prefill, pd_role::decode})
      if (v.get_ref<const std::string&>() == to_string(r))
        return r;
  throw config_error(where + ".role: expected one of mixed, prefill, decode, got " + v.dump());
}

size_t count_of(const std::vector<instance_spec>& specs, pd_role role) {
  return static_cast<size_t>(std::count_if(specs.begin(), specs.end(),
                                           [&](const instance_spec& x) { return x.role == role; }));
}

}  // namespace

std::vector<instance_spec> resolve_cluster(const config& c) {
  const json& groups = c.list(keys::cluster::instances);
  if (groups.empty())
    throw config_error("cluster.instances: expected at least one group of instances");
  std::vector<instance_spec> out;
  std::map<pd_role, uint32_t> numbered;
  for (size_t i = 0; i < groups.size(); ++i) {
    std::string where = "cluster.instances[" + std::to_string(i) + "]";
    const json& g = groups[i];
    if (!g.is_object())
      throw config_error(where + ": expected an object {role, count, overrides}, got " + g.dump());
    for (auto it = g.begin(); it != g.end(); ++it)
      if (it.key() != "role" && it.key() != "count" && it.key() != "overrides")
        throw config_error(where + ": unknown field '" + it.key()
                           + "' (fields: role, count, overrides)");
    if (!g.contains("role"))
      throw config_error(where + ": field 'role' is missing (mixed, prefill or decode)");
    pd_role role = role_of(g["role"], where);
    uint64_t count = 1;
    if (g.contains("count")) {
      const json& n = g["count"];
      if (!n.is_number_integer() || n.get<int64_t>() < 1
          || n.get<int64_t>() > static_cast<int64_t>(max_instances))
        throw config_error(where + ".count: expected an integer in [1, "
                           + std::to_string(max_instances) + "], got " + n.dump());
      count = n.get<uint64_t>();
    }
    config settings = c;
    if (g.contains("overrides")) {
      const json& o = g["overrides"];
      if (!o.is_object())
        throw config_error(where + ".overrides: expected an object of config keys, got " + o.dump());
      std::vector<std::string> keys;
      flat_keys(o, "", keys);
      for (const std::string& k : keys)
        if (!overridable(k))
          throw config_error(where + ".overrides: " + k
                             + ": only cache.*, scheduler.*, compute.* and links.* keys differ "
                               "between instances");
      settings.merge_json(o, where + ".overrides");
    }
    for (uint64_t k = 0; k < count; ++k) {
      if (out.size() == max_instances)
        throw config_error("cluster.instances: more than " + std::to_string(max_instances)
                           + " instances in all");
      uint32_t index = numbered[role]++;
      out.push_back({std::string(to_string(role)) + "-" + std::to_string(index), role, settings});
    }
  }
  // Disaggregated: every request is prefilled on a prefill instance and decoded on a decode one.
  size_t mixed = count_of(out, pd_role::mixed), prefill = count_of(out, pd_role::prefill),
         decode = count_of(out, pd_role::decode);
  if (prefill + decode > 0 && (prefill == 0 || decode == 0 || mixed > 0))
    throw config_error("cluster.instances: a disaggregated deployment needs prefill and decode "
                       "instances and no mixed ones (got " + std::to_string(mixed) + " mixed, "
                       + std::to_string(prefill) + " prefill, " + std::to_string(decode)
                       + " decode)");
  return out;
}

bool single_instance(const config& c) {
  const json& groups = c.list(keys::cluster::instances);
  return groups.size() == 1 && groups[0].is_object() && groups[0].value("role", "") == "mixed"
         && groups[0].value("count", 1) == 1 && !groups[0].contains("overrides");
}

}  // namespace kvtier
