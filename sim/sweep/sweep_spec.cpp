#include "sim/sweep/sweep_spec.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <glob.h>
#include <xxhash.h>

#include "core/build_info.hpp"
#include "runtime/config/options.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep))
    parts.push_back(part);
  return parts;
}

// A JSON value as the text of a --set assignment.
std::string assignment_text(const std::string& key, const json& value) {
  return key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
}

std::vector<std::string> sets_of(const json& j, const std::string& where) {
  std::vector<std::string> sets;
  if (j.is_object()) {
    for (auto& [key, value] : j.items())
      sets.push_back(assignment_text(key, value));
  } else if (j.is_array()) {
    for (const auto& s : j) {
      if (!s.is_string())
        throw config_error(where + ": expected \"key=value\" texts or an object of keys");
      sets.push_back(s.get<std::string>());
    }
  } else {
    throw config_error(where + ": expected an object of config keys or a list of \"key=value\"");
  }
  return sets;
}

std::string resolve_path(const fs::path& base, const std::string& path) {
  fs::path p(path);
  return p.is_absolute() ? p.string() : (base / p).lexically_normal().string();
}

std::vector<std::string> paths_of(const json& j, const fs::path& base, const std::string& where) {
  std::vector<std::string> paths;
  if (!j.is_array() || j.empty())
    throw config_error(where + ": expected a non-empty list of trace paths");
  for (const auto& p : j) {
    if (!p.is_string())
      throw config_error(where + ": trace paths are texts");
    std::string path = resolve_path(base, p.get<std::string>());
    if (path.find_first_of("*?[") == std::string::npos) {
      paths.push_back(path);
      continue;
    }
    glob_t g{};
    int rc = ::glob(path.c_str(), 0, nullptr, &g);  // sorted
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i)
      paths.push_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (rc != 0)
      throw config_error(where + ": " + path + " matches no file");
  }
  return paths;
}

sweep_axis axis_of(const json& a, const std::string& where) {
  if (!a.is_object() || !a.contains("values") || !a["values"].is_array() || a["values"].empty())
    throw config_error(where + ": expected {\"key\": K, \"values\": [...]} or "
                               "{\"name\": N, \"values\": [{\"label\": L, \"set\": {...}}, ...]}");
  sweep_axis axis;
  bool by_key = a.contains("key");
  axis.name = by_key ? a["key"].get<std::string>() : a.value("name", std::string());
  if (axis.name.empty())
    throw config_error(where + ": an axis needs \"key\" or \"name\"");
  for (size_t i = 0; i < a["values"].size(); ++i) {
    const json& v = a["values"][i];
    std::string vwhere = where + ".values[" + std::to_string(i) + "]";
    axis_value value;
    if (by_key) {
      value.label = v.is_string() ? v.get<std::string>() : v.dump();
      value.sets.push_back(assignment_text(axis.name, v));
    } else {
      if (!v.is_object() || !v.contains("label") || !v.contains("set"))
        throw config_error(vwhere + ": expected {\"label\": L, \"set\": {key: value, ...}}");
      value.label = v["label"].get<std::string>();
      value.sets = sets_of(v["set"], vwhere + ".set");
    }
    axis.values.push_back(std::move(value));
  }
  return axis;
}

}  // namespace

sweep_axis parse_grid_option(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw config_error("--grid " + text + ": expected key=value1,value2,...");
  sweep_axis axis;
  axis.name = text.substr(0, eq);
  for (const auto& v : split(text.substr(eq + 1), ',')) {
    if (v.empty())
      throw config_error("--grid " + text + ": an empty value");
    axis.values.push_back({v, {axis.name + "=" + v}});
  }
  return axis;
}

std::vector<uint64_t> parse_seeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  for (const auto& s : split(text, ',')) {
    size_t used = 0;
    try {
      seeds.push_back(std::stoull(s, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size())
      throw config_error("--seeds " + text + ": expected non-negative integers separated by commas");
  }
  if (seeds.empty())
    throw config_error("--seeds: at least one seed");
  return seeds;
}

// A search's fields (docs/sweep.md, "The SLO capacity study"): the axis it moves and where it
// starts; the SLO's limits and precision are the slo.* config keys.
axis_search axis_search_of(const json& j, const std::string& where) {
  if (!j.is_object())
    throw config_error(where + ": expected an object {\"axis\": \"trace.time_scale\", "
                       "\"start\": 8}");
  for (auto& [key, value] : j.items())
    if (key != "axis" && key != "start")
      throw config_error(where + ": unknown field \"" + key + "\" (valid: axis, start)");
  axis_search s;
  std::string axis = j.value("axis", key_of(search_axis::time_scale));
  if (axis == key_of(search_axis::session_copies)) {
    s.axis = search_axis::session_copies;
    s.start = 1;
  } else if (axis != key_of(search_axis::time_scale)) {
    throw config_error(where + ".axis: the search moves trace.time_scale or "
                       "trace.session_copies, not " + axis);
  }
  s.start = j.value("start", s.start);
  if (!(s.start > 0))
    throw config_error(where + ".start: above 0");
  if (s.axis == search_axis::session_copies && (s.start != std::floor(s.start) || s.start > 4096))
    throw config_error(where + ".start: a whole number of copies, 1 to 4096");
  return s;
}

// One search for every trace set ({"axis": ..., "start": ...}), or one per trace set
// ({"conversation": {...}, "agentic": {...}}, every set named).
rate_search_spec search_of(const json& j, const std::string& where,
                           const std::vector<trace_set>& sets) {
  rate_search_spec s;
  s.enabled = true;
  if (!j.is_object() || j.empty() || j.contains("axis") || j.contains("start")) {
    s.all = axis_search_of(j, where);
    return s;
  }
  for (auto& [name, one] : j.items()) {
    bool known = false;
    for (const auto& t : sets)
      known = known || t.name == name;
    if (!known)
      throw config_error(where + "." + name + ": no trace set of that name");
    s.per_trace_set[name] = axis_search_of(one, where + "." + name);
  }
  for (const auto& t : sets)
    if (!s.per_trace_set.count(t.name))
      throw config_error(where + ": no search for trace set " + t.name);
  return s;
}

const char* key_of(search_axis axis) {
  return axis == search_axis::session_copies ? "trace.session_copies" : "trace.time_scale";
}

const axis_search& rate_search_spec::of(const std::string& trace_set) const {
  auto it = per_trace_set.find(trace_set);
  return it == per_trace_set.end() ? all : it->second;
}

sweep_spec read_sweep_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw config_error(path + ": cannot open sweep file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw config_error(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object())
    throw config_error(path + ": expected a JSON object (docs/sweep.md)");
  static const char* known[] = {"description", "config", "set", "traces", "grid", "seeds",
                                "mode", "format", "needs", "search"};
  for (auto& [key, value] : j.items()) {
    bool ok = false;
    for (const char* k : known)
      ok = ok || key == k;
    if (!ok)
      throw config_error(path + ": unknown field \"" + key + "\" (valid: description, config, set, "
                         "traces, grid, seeds, mode, format, search)");
  }
  if (j.contains("needs"))
    throw config_error(path + ": this sweep needs " + j["needs"].dump() +
                       ", which kvtier does not have yet");
  fs::path base = fs::path(path).parent_path();
  sweep_spec spec;
  try {
    if (j.contains("config"))
      spec.config_file = resolve_path(base, j["config"].get<std::string>());
    if (j.contains("set"))
      spec.sets = sets_of(j["set"], path + ": set");
    if (j.contains("traces")) {
      const json& t = j["traces"];
      if (t.is_array()) {
        spec.trace_sets.push_back({"traces", paths_of(t, base, path + ": traces")});
      } else if (t.is_object() && !t.empty()) {
        for (auto& [name, list] : t.items())
          spec.trace_sets.push_back({name, paths_of(list, base, path + ": traces." + name)});
      } else {
        throw config_error(path + ": traces: expected a list of paths or an object of named lists");
      }
    }
    if (j.contains("grid")) {
      if (!j["grid"].is_array())
        throw config_error(path + ": grid: expected a list of axes");
      for (size_t i = 0; i < j["grid"].size(); ++i)
        spec.axes.push_back(axis_of(j["grid"][i], path + ": grid[" + std::to_string(i) + "]"));
    }
    if (j.contains("seeds"))
      spec.seeds = j["seeds"].get<std::vector<uint64_t>>();
    if (j.contains("search"))
      spec.search = search_of(j["search"], path + ": search", spec.trace_sets);
    spec.mode = j.value("mode", spec.mode);
    spec.format = j.value("format", spec.format);
  } catch (const json::exception& e) {
    throw config_error(path + ": " + e.what());
  }
  if (spec.mode != "full" && spec.mode != "hitrate")
    throw config_error(path + ": mode: full or hitrate, not " + spec.mode);
  return spec;
}

std::vector<sweep_cell> expand(const sweep_spec& spec) {
  if (spec.trace_sets.empty())
    throw config_error("a sweep needs at least one trace (--trace or the sweep file's traces)");
  if (spec.seeds.empty())
    throw config_error("a sweep needs at least one seed");
  for (const auto& axis : spec.axes)
    if (axis.name == "traces" || axis.name == "seed")
      throw config_error("grid axis \"" + axis.name + "\": the name is taken (traces, seed)");
  config base;
  for (const auto& s : spec.base_sets)
    base.set(s);
  if (!spec.config_file.empty())
    base.merge_file(spec.config_file);
  for (const auto& s : spec.sets)
    base.set(s);
  std::vector<sweep_cell> cells;
  std::vector<size_t> at(spec.axes.size(), 0);
  for (const auto& ts : spec.trace_sets) {
    std::vector<std::string> traces;
    for (const auto& p : ts.paths) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec))
        throw trace_error(p, 0, "--trace", "no such trace file");
      traces.push_back(fs::absolute(p).lexically_normal().string());
    }
    std::fill(at.begin(), at.end(), 0);
    for (;;) {
      config c = base;
      std::vector<std::pair<std::string, std::string>> grid;
      if (spec.trace_sets.size() > 1)
        grid.emplace_back("traces", ts.name);
      for (size_t a = 0; a < spec.axes.size(); ++a) {
        const axis_value& v = spec.axes[a].values[at[a]];
        for (const auto& s : v.sets) {
          try {
            c.set(s);
          } catch (const config_error& e) {
            throw config_error("grid axis " + spec.axes[a].name + " value " + v.label + ": "
                               + e.what());
          }
        }
        grid.emplace_back(spec.axes[a].name, v.label);
      }
      for (uint64_t seed : spec.seeds) {
        sweep_cell cell;
        cell.grid = grid;
        cell.config = c.effective();
        cell.traces = traces;
        cell.trace_set = ts.name;
        cell.seed = seed;
        cell.mode = spec.mode;
        cell.format = spec.format;
        cell.deterministic = spec.deterministic;
        cell.id = cell_identity(cell);
        cells.push_back(std::move(cell));
      }
      size_t a = spec.axes.size();
      while (a > 0 && ++at[a - 1] == spec.axes[a - 1].values.size())
        at[--a] = 0;
      if (a == 0)
        break;
    }
  }
  return cells;
}

std::string cell_identity(const sweep_cell& cell) {
  std::ostringstream key;
  // The build is part of the identity: a rebuilt binary never reuses cells of another build.
  key << "kvtier-cell-1\n" << build_id() << '\n' << cell.mode << '\n' << cell.format << '\n'
      << cell.seed << '\n'
      << cell.deterministic << '\n' << cell.config.dump() << '\n';
  for (const auto& t : cell.traces) {
    std::error_code ec;
    auto size = fs::file_size(t, ec);
    key << t << '\t' << (ec ? 0 : size) << '\n';
  }
  std::string text = key.str();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return hex;
}

json to_json(const sweep_cell& cell) {
  json grid = json::array();
  for (const auto& [name, label] : cell.grid)
    grid.push_back({name, label});
  return {{"id", cell.id}, {"grid", grid}, {"config", cell.config}, {"traces", cell.traces},
          {"trace_set", cell.trace_set}, {"seed", cell.seed}, {"mode", cell.mode},
          {"format", cell.format}, {"deterministic", cell.deterministic}};
}

sweep_cell cell_from_json(const json& j) {
  sweep_cell cell;
  cell.id = j.at("id").get<std::string>();
  for (const auto& g : j.at("grid"))
    cell.grid.emplace_back(g.at(0).get<std::string>(), g.at(1).get<std::string>());
  cell.config = j.at("config");
  cell.traces = j.at("traces").get<std::vector<std::string>>();
  cell.trace_set = j.at("trace_set").get<std::string>();
  cell.seed = j.at("seed").get<uint64_t>();
  cell.mode = j.at("mode").get<std::string>();
  cell.format = j.at("format").get<std::string>();
  cell.deterministic = j.at("deterministic").get<bool>();
  return cell;
}

}  // namespace kvtier
