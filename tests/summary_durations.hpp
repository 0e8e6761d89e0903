#pragma once

// Every duration a summary reports is >= 0 (issue: storage.modelled_write_service_s was negative
// on a busy host): a key under `latency_ms`, or one whose name ends in a time unit (_s, _ms, _us,
// _ns, and lists such as queue_wait_s_by_quarter), anywhere but in the echoed config. Returns
// the paths of those that are negative.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier::test {

inline bool names_a_duration(const std::string& key) {
  auto ends = [&](const char* unit) {
    std::string u = unit;
    return key.size() > u.size() && key.compare(key.size() - u.size(), u.size(), u) == 0;
  };
  return ends("_s") || ends("_ms") || ends("_us") || ends("_ns") ||
         key.find("_s_by_") != std::string::npos;
}

inline void negative_durations(const nlohmann::json& j, const std::string& path, bool duration,
                               std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (path.empty() && it.key() == "config")
        continue;  // inputs, not results
      negative_durations(*it, path + "." + it.key(),
                         duration || names_a_duration(it.key()) || it.key() == "latency_ms", out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      negative_durations(j[i], path + "[" + std::to_string(i) + "]", duration, out);
  } else if (duration && j.is_number() && j.get<double>() < 0) {
    out.push_back(path + " = " + j.dump());
  }
}

/// The negative durations of `summary` (empty: none).
inline std::vector<std::string> negative_durations(const nlohmann::json& summary) {
  std::vector<std::string> out;
  negative_durations(summary, "", false, out);
  return out;
}

}  // namespace kvtier::test
