#include "sim/sweep/flatten.hpp"

namespace kvtier {

using nlohmann::json;

void flatten_summary(const json& j, const std::string& prefix,
                     std::vector<std::pair<std::string, json>>& out) {
  auto key = [&](const std::string& k) { return prefix.empty() ? k : prefix + "." + k; };
  if (j.is_object()) {
    for (auto& [k, v] : j.items())
      flatten_summary(v, key(k), out);
  } else if (j.is_array()) {
    bool objects = !j.empty();
    for (const auto& e : j)
      objects = objects && e.is_object();
    if (objects) {
      for (size_t i = 0; i < j.size(); ++i) {
        const json& e = j[i];
        bool named = e.contains("name") && e["name"].is_string();
        std::string k = named ? e["name"].get<std::string>() : std::to_string(i);
        json rest = e;
        if (named)
          rest.erase("name");
        flatten_summary(rest, key(k), out);
      }
    } else {
      std::string text;
      for (size_t i = 0; i < j.size(); ++i)
        text += (i ? " | " : "") + (j[i].is_string() ? j[i].get<std::string>() : j[i].dump());
      out.emplace_back(prefix, text);
    }
  } else {
    out.emplace_back(prefix, j);
  }
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos)
    return text;
  std::string q = "\"";
  for (char c : text)
    q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_text(const json& v) {
  if (v.is_null())
    return "";
  if (v.is_string())
    return csv_field(v.get<std::string>());
  return csv_field(v.dump());
}

}  // namespace kvtier
