#pragma once

// Configuration: every key kvtier understands, with its type, range and meaning, in one table
// assembled from one table per section (runtime/config/*_keys.cpp, in keys.hpp's order).
// Values come, in increasing precedence, from configs/default.json (compiled into the binary),
// a --config file, and --set key=value overrides. Keys are dotted paths ("cache.block_size");
// files may nest them ({"cache": {"block_size": 64}}) or spell them flat. An unknown key or a
// value of the wrong type is an error that names the key, the source, and what was expected.
// preset.model and preset.gpu set a group of keys at once, below any file or --set value
// (docs/models.md, "Presets").

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/keys.hpp"

namespace kvtier {

class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The table of every key.
const std::vector<option_spec>& option_specs();
/// The spec of `key`.
const option_spec& option_spec_of(key_name key);
/// What a value of `spec` must be, in words, with its range: "a number in [1e-6, 1e6]".
std::string expected_value_text(const option_spec& spec);

/// Where a key's value came from, in increasing precedence: configs/default.json, a preset
/// (preset.model, preset.gpu), a JSON object laid over it (a --config file, a sweep cell), a
/// --set, or a cluster.instances group's overrides.
enum class value_origin : uint8_t { defaults, preset, file, set, cluster_override };

const char* to_string(value_origin o);

/// A key's origin, and its words: the file, the assignment, the preset or the group.
struct value_source {
  value_origin origin = value_origin::defaults;
  std::string where;
};

class config {
 public:
  /// The defaults (configs/default.json as compiled in).
  config();

  /// Overlays a JSON file. `source` names it in errors.
  void merge_file(const std::string& path);
  /// Overlays a JSON object.
  void merge_json(const nlohmann::json& j, const std::string& source);
  /// Applies one "key=value" override; the value is read as JSON when it parses (numbers, true,
  /// null, quoted text) and as plain text otherwise.
  void set(const std::string& assignment);

  // Reads take the named keys of keys.hpp, never text: see option_spec.hpp.
  bool is_set(key_name key) const;
  /// Whether `key` still holds configs/default.json's value: no file, --set or preset chose it.
  bool is_default(key_name key) const;
  int64_t integer(integer_key key) const;
  double number(number_key key) const;
  const std::string& text(text_key key) const;
  bool boolean(boolean_key key) const;
  /// A list's JSON array (its items are checked by whoever reads it).
  const nlohmann::json& list(list_key key) const;
  std::vector<std::string> text_list(text_list_key key) const;

  /// All keys and values as one nested object (for summary.json and `kvtier config`).
  nlohmann::json effective() const;
  /// The value of the key named `key` (null when unset) and where it came from.
  const nlohmann::json& value_of(const std::string& key) const;
  value_source source_of(const std::string& key) const;

 private:
  /// No key set: what the compiled-in defaults are merged into, once.
  explicit config(std::nullptr_t);
  void assign(const std::string& key, const nlohmann::json& value, const std::string& source);
  const nlohmann::json& value(key_name key) const;

  std::vector<nlohmann::json> values_;  // parallel to option_specs()
  std::vector<std::string> sources_;    // where each value came from
};

/// Text listing the valid keys, for error messages.
std::string valid_keys_text();

}  // namespace kvtier
