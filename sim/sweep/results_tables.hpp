#pragma once

// A sweep's result tables (schema: docs/outputs.md, "kvtier sweep"), written by collect from one
// row per cell (the cell, its grid values, seed, status, and its summary.json flattened):
//   results.csv       wide: cell, status, grid axes, seed, error, one column per metric
//                     (numbers and flags only: no config, per-file or text columns), then the
//                     build that ran the cell (kvtier.*)
//   results_long.csv  long: cell, metric, value, unit; one line per metric of each cell
//   results.json      every column of every row (config and provenance too), for the reports
// Grid values that are numbers are written as numbers. Every file is written atomically, and
// the same cells give the same bytes however they ran.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier {

using result_row = std::map<std::string, nlohmann::json>;

/// A grid label as a value: a number when the whole label is one, else the text.
nlohmann::json axis_value(const std::string& label);

/// Whether a flattened summary column goes out of results.json (per-file trace columns).
bool dropped_column(const std::string& column);
/// Whether a results.json column is a metric of the wide and long tables.
bool metric_column(const std::string& column);

/// The unit of a metric column (docs/outputs.md, "kvtier sweep"); `value` tells flags apart.
std::string unit_of(const std::string& metric, const nlohmann::json& value);

/// Writes results.csv, results_long.csv and results.json into `dir`. `columns` lists every
/// column in order: cell, status, the axes, seed, error, then the summaries' columns.
void write_results(const std::string& dir, const std::vector<std::string>& axes,
                   const std::vector<std::string>& columns, const std::vector<result_row>& rows);

}  // namespace kvtier
