#pragma once

// JSON as kvtier reads its own inputs (config files, calibration files): a key given twice in one
// object is an error, since nlohmann::json would silently keep the last one and a stray copy of a
// key would change a run without a word.

#include <string>

#include <nlohmann/json.hpp>

namespace kvtier {

/// Parses `text`; throws config_error naming `source` when it is not JSON or repeats a key.
nlohmann::json parse_json_strict(const std::string& text, const std::string& source);

/// Reads and parses the file at `path` the same way; `what` names it in errors ("config file").
/// Throws config_error when it cannot be read (a directory included).
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace kvtier
