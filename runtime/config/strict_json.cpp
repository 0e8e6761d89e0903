#include "runtime/config/strict_json.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "runtime/config/options.hpp"

namespace kvtier {

using nlohmann::json;

json parse_json_strict(const std::string& text, const std::string& source) {
  // The keys seen in each object being parsed, innermost last, and the key that opened each.
  std::vector<std::set<std::string>> seen;
  std::vector<std::string> path;
  std::string last_key;
  auto check = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        seen.emplace_back();
        path.push_back(last_key);
        break;
      case json::parse_event_t::object_end:
        seen.pop_back();
        path.pop_back();
        break;
      case json::parse_event_t::key: {
        last_key = parsed.get<std::string>();
        if (!seen.back().insert(last_key).second) {
          std::string name;
          for (size_t i = 1; i < path.size(); ++i)
            name += path[i] + ".";
          throw config_error(source + ": key '" + name + last_key + "' appears twice");
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text, check);
  } catch (const json::exception& e) {  // a syntax error, or a number out of double's range
    throw config_error(source + ": not valid JSON: " + e.what());
  }
}

json read_json_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw config_error(path + ": cannot read " + what + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw config_error(path + ": cannot open " + what + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw config_error(path + ": cannot read " + what);
  return parse_json_strict(text.str(), path);
}

}  // namespace kvtier
