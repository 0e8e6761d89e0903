#include "sim/sweep/results_tables.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "sim/report/atomic_file.hpp"
#include "sim/sweep/flatten.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

bool contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

const std::set<std::string> lead_columns = {"cell", "status", "seed", "error"};

// Columns whose values are numbers or flags in at least one row: the metrics.
std::vector<std::string> metric_columns(const std::vector<std::string>& axes,
                                        const std::vector<std::string>& columns,
                                        const std::vector<result_row>& rows) {
  std::set<std::string> axis(axes.begin(), axes.end());
  std::vector<std::string> out;
  for (const std::string& c : columns) {
    if (lead_columns.count(c) || axis.count(c) || !metric_column(c))
      continue;
    for (const result_row& r : rows) {
      auto it = r.find(c);
      if (it != r.end() && (it->second.is_number() || it->second.is_boolean())) {
        out.push_back(c);
        break;
      }
    }
  }
  return out;
}

json value_of(const result_row& row, const std::string& column) {
  auto it = row.find(column);
  return it == row.end() ? json() : it->second;
}

void write_wide(const std::string& dir, const std::vector<std::string>& columns,
                const std::vector<result_row>& rows) {
  atomic_file csv(dir + "/results.csv");
  for (size_t i = 0; i < columns.size(); ++i)
    csv.out() << (i ? "," : "") << csv_field(columns[i]);
  csv.out() << '\n';
  for (const result_row& row : rows) {
    for (size_t i = 0; i < columns.size(); ++i)
      csv.out() << (i ? "," : "") << csv_text(value_of(row, columns[i]));
    csv.out() << '\n';
  }
  csv.commit();
}

void write_long(const std::string& dir, const std::vector<std::string>& metrics,
                const std::vector<result_row>& rows) {
  atomic_file csv(dir + "/results_long.csv");
  csv.out() << "cell,metric,value,unit\n";
  for (const result_row& row : rows)
    for (const std::string& m : metrics) {
      json v = value_of(row, m);
      if (!v.is_number() && !v.is_boolean())
        continue;
      json number = v.is_boolean() ? json(v.get<bool>() ? 1 : 0) : v;
      csv.out() << csv_text(value_of(row, "cell")) << ',' << csv_field(m) << ','
                << csv_text(number) << ',' << unit_of(m, v) << '\n';
    }
  csv.commit();
}

}  // namespace

json axis_value(const std::string& label) {
  if (label.empty() || label.find_first_not_of("0123456789+-.eE") != std::string::npos)
    return label;
  const char* begin = label.c_str();
  char* end = nullptr;
  errno = 0;
  long long whole = std::strtoll(begin, &end, 10);
  if (errno == 0 && *end == '\0')
    return whole;
  errno = 0;
  double x = std::strtod(begin, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(x))
    return label;
  if (x == std::floor(x) && std::fabs(x) < 9e15)
    return static_cast<long long>(x);  // 1e6 is the integer it names
  return x;
}

bool dropped_column(const std::string& column) { return starts_with(column, "trace.files."); }

bool metric_column(const std::string& column) {
  return !dropped_column(column) && !starts_with(column, "config.")
         && !starts_with(column, "kvtier.");
}

std::string unit_of(const std::string& m, const json& value) {
  if (value.is_boolean())
    return "bool";
  if (contains(m, "latency_ms.") && ends_with(m, ".count"))
    return "requests";
  if (contains(m, "latency_ms.") || ends_with(m, "_ms"))
    return "ms";
  if (contains(m, "hit_ratio.") || ends_with(m, "_share"))
    return "fraction";
  if (ends_with(m, "_gbps"))
    return "GB/s";
  if (ends_with(m, "virtual_s_per_wall_s") || ends_with(m, "queue_growth"))
    return "ratio";
  if (ends_with(m, "_per_s"))
    return "1/s";
  if (ends_with(m, "_s"))
    return "s";
  if (contains(m, "bytes"))
    return "bytes";
  if (contains(m, "tokens"))
    return "tokens";
  if (contains(m, "blocks") || starts_with(m, "transfers.") || starts_with(m, "cache_ops.")
      || starts_with(m, "evictions."))
    return "blocks";
  if (contains(m, "requests"))
    return "requests";
  return "count";
}

void write_results(const std::string& dir, const std::vector<std::string>& axes,
                   const std::vector<std::string>& columns, const std::vector<result_row>& rows) {
  std::vector<std::string> metrics = metric_columns(axes, columns, rows);
  std::vector<std::string> wide = {"cell", "status"};
  wide.insert(wide.end(), axes.begin(), axes.end());
  wide.push_back("seed");
  wide.push_back("error");
  wide.insert(wide.end(), metrics.begin(), metrics.end());
  for (const std::string& c : columns)
    if (starts_with(c, "kvtier."))
      wide.push_back(c);  // provenance: the build that ran each cell (docs/outputs.md)
  write_wide(dir, wide, rows);
  write_long(dir, metrics, rows);
  json jrows = json::array();
  for (const result_row& row : rows) {
    json jrow = json::object();
    for (const std::string& c : columns)
      jrow[c] = value_of(row, c);
    jrows.push_back(std::move(jrow));
  }
  atomic_file out(dir + "/results.json");
  out.out() << json({{"axes", axes}, {"columns", columns}, {"metrics", metrics},
                     {"rows", jrows}}).dump(2)
            << '\n';
  out.commit();
}

}  // namespace kvtier
