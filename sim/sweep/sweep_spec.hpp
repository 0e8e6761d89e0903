#pragma once

// A sweep: a grid of configurations over one or more trace sets and seeds. It comes from the
// command line (--grid key=v1,v2 ...) or a JSON sweep file (docs/sweep.md), and expands into
// cells, each one replay. A cell is named by a hash of what decides its result (its effective
// config, its traces, seed and mode), so that a finished cell is recognised and not run again.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier {

/// One value of a grid axis: a label for tables and the config assignments it stands for.
struct axis_value {
  std::string label;
  std::vector<std::string> sets;  ///< "key=value"
};

struct sweep_axis {
  std::string name;  ///< a config key, or a name chosen in a sweep file
  std::vector<axis_value> values;
};

struct trace_set {
  std::string name;
  std::vector<std::string> paths;
};

/// The config key a rate search moves: the time scale (rate x = 1 / trace.time_scale), or the
/// copies of each session (rate x = trace.session_copies), for closed-loop traces whose load
/// no time scale raises (docs/sweep.md, "The SLO capacity study").
enum class search_axis { time_scale, session_copies };

const char* key_of(search_axis axis);

struct axis_search {
  search_axis axis = search_axis::time_scale;
  double start = 8;  ///< where the search starts: a time scale, or a number of copies
};

/// A sweep file's "search": the SLO capacity study searches each configuration's highest
/// sustained rate by moving one axis instead of replaying a grid of it; one search for every
/// trace set, or one per trace set.
struct rate_search_spec {
  bool enabled = false;
  axis_search all;
  std::map<std::string, axis_search> per_trace_set;  ///< trace set name -> its search
  const axis_search& of(const std::string& trace_set) const;
};

struct sweep_spec {
  std::vector<std::string> base_sets;  ///< over the defaults, under the config file
  std::string config_file;        ///< laid over the defaults, before `sets`
  std::vector<std::string> sets;  ///< fixed assignments, before each cell's grid values
  std::vector<trace_set> trace_sets;  ///< several form the grid axis "traces"
  std::vector<sweep_axis> axes;
  std::vector<uint64_t> seeds{1};
  std::string mode = "full";      ///< full or hitrate
  std::string format = "auto";
  bool deterministic = false;     ///< wall-clock figures written as 0
  rate_search_spec search;        ///< kvtier study only (sim/sweep/slo_study.hpp)
};

/// `key=v1,v2,...` as an axis named `key` (values may not contain commas).
sweep_axis parse_grid_option(const std::string& text);
/// "1,2,3" as seeds.
std::vector<uint64_t> parse_seeds(const std::string& text);

/// Reads a JSON sweep file; relative trace and config paths resolve against its folder, and a
/// trace path may be a glob pattern (agentic/trace_*.json).
/// Throws config_error naming the file and the field.
sweep_spec read_sweep_file(const std::string& path);

struct sweep_cell {
  std::string id;
  std::vector<std::pair<std::string, std::string>> grid;  ///< axis name -> value label
  nlohmann::json config;            ///< the effective config, every key
  std::vector<std::string> traces;  ///< absolute paths
  std::string trace_set;
  uint64_t seed = 1;
  std::string mode;
  std::string format;
  bool deterministic = false;
};

/// Every cell in order (trace sets outermost, then axes as given, seeds innermost). Checks every
/// assignment and that every trace exists; throws config_error / trace_error naming them.
std::vector<sweep_cell> expand(const sweep_spec& spec);

/// The identity of a cell: 16 hex digits of a hash of its mode, format, seed, deterministic
/// flag, effective config, and each trace's absolute path and size in bytes. (The mtime is left
/// out, so that a copied trace keeps the ids.)
std::string cell_identity(const sweep_cell& cell);

nlohmann::json to_json(const sweep_cell& cell);
sweep_cell cell_from_json(const nlohmann::json& j);

}  // namespace kvtier
