#pragma once

// Reading the CSV files kvtier writes (RFC 4180: quoted fields with doubled quotes), for the
// command-line tests.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/cli_support.hpp"

namespace cli_test {

inline std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::string text = slurp(p), field;
  std::vector<std::string> row;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  return rows;
}

/// Row `r` of a CSV read by read_csv, by its header's names.
inline std::map<std::string, std::string> row_map(const std::vector<std::vector<std::string>>& csv,
                                                  size_t r) {
  std::map<std::string, std::string> m;
  for (size_t i = 0; i < csv[0].size(); ++i)
    m[csv[0][i]] = csv[r][i];
  return m;
}

}  // namespace cli_test
