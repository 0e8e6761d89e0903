#pragma once

// A summary.json as flat columns: nested keys joined by dots; a list of objects that carry a
// "name" is keyed by it (traffic.links.h2d.bytes), other lists of objects by position
// (trace.files.0.path); a list of plain values becomes one text joined by " | ".

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier {

void flatten_summary(const nlohmann::json& j, const std::string& prefix,
                     std::vector<std::pair<std::string, nlohmann::json>>& out);

/// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text);
/// A scalar JSON value as CSV text (numbers as JSON writes them, null empty).
std::string csv_text(const nlohmann::json& v);

}  // namespace kvtier
