#include "runtime/config/options.hpp"

#include "runtime/config/default_config.hpp"
#include "runtime/config/presets.hpp"
#include "runtime/config/strict_json.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace kvtier {

namespace {

using nlohmann::json;

// The sections in configs/default.json's order; `kvtier config` lists the keys so.
std::vector<option_spec> assemble_specs() {
  std::vector<option_spec> all;
  for (auto section : {cache_key_specs, storage_key_specs, trace_key_specs, scheduler_key_specs,
                       compute_key_specs, links_key_specs, cluster_key_specs, router_key_specs,
                       pd_key_specs, faults_key_specs, serve_key_specs, model_key_specs,
                       gpu_key_specs, parallel_key_specs, preset_key_specs,
                       output_key_specs, slo_key_specs}) {
    std::vector<option_spec> rows = section();
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

const std::vector<option_spec>& specs() {
  static const std::vector<option_spec> all = assemble_specs();
  return all;
}

// 1e-06 -> 1e-6, 1e+06 -> 1e6, 0.001 -> 0.001: short and exact for the bounds in the table.
std::string number_text(double x) {
  std::ostringstream o;
  o << x;
  std::string t = o.str();
  auto e = t.find('e');
  if (e == std::string::npos)
    return t;
  std::string mantissa = t.substr(0, e), exponent = t.substr(e + 1);
  bool negative = exponent[0] == '-';
  size_t digits = exponent.find_first_not_of("+-0");
  return mantissa + "e" + (negative ? "-" : "") +
         (digits == std::string::npos ? "0" : exponent.substr(digits));
}

std::string describe(const option_spec& s) {
  switch (s.type) {
    case option_type::integer: {
      std::ostringstream o;
      o << "an integer in [" << static_cast<long long>(s.min) << ", "
        << static_cast<long long>(s.max) << "]";
      return s.optional ? o.str() + " or null" : o.str();
    }
    case option_type::number:
      return "a number in [" + number_text(s.min) + ", " + number_text(s.max) + "]" +
             (s.optional ? " or null" : "");
    case option_type::boolean: return "true or false";
    case option_type::list: return "a JSON list";
    case option_type::text_list: return "a list of strings";
    case option_type::text: {
      if (s.choices.empty())
        return "a string";
      std::string c = "one of";
      for (size_t i = 0; i < s.choices.size(); ++i)
        c += std::string(i ? ", " : " ") + s.choices[i];
      return c;
    }
  }
  return "?";
}

// Pairs of keys that give one capacity in two units: setting one clears the other, so an override
// in blocks replaces a default in tokens. One source setting both is an error.
const std::pair<integer_key, integer_key> unit_pairs[] = {
  {keys::cache::device_tokens, keys::cache::device_blocks},
  {keys::cache::host_tokens, keys::cache::host_blocks},
  {keys::storage::capacity_tokens, keys::storage::capacity_blocks},
};

// A secret given where it would be seen (ps, shell history, summary.json) is refused by name,
// its value never repeated (docs/design.md "Secured Redis").
bool is_secret_key(const std::string& key) {
  return key.size() >= 8 && key.compare(key.size() - 8, 8, "password") == 0;
}

std::string secret_refusal(const std::string& key) {
  return "'" + key + "': a password is never taken from the command line or a config (ps, shell "
         "history and summary.json would show it); put it in a file named by "
         "storage.redis_password_file, or in KVTIER_REDIS_PASSWORD";
}

size_t index_of(const std::string& key) {
  for (size_t i = 0; i < specs().size(); ++i)
    if (key == specs()[i].key)
      return i;
  if (is_secret_key(key))
    throw config_error(secret_refusal(key));
  throw config_error("unknown config key '" + key + "'; valid keys:\n" + valid_keys_text());
}

void flatten(const json& j, const std::string& prefix,
             std::vector<std::pair<std::string, json>>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flatten(*it, key, out);
    else
      out.emplace_back(key, *it);
  }
}

// index_of, with the error naming where the key came from.
size_t index_for(const std::string& key, const std::string& source) {
  try {
    return index_of(key);
  } catch (const config_error& e) {
    throw config_error(source + ": " + e.what());
  }
}

config_error bad_value(const std::string& source, const std::string& key, const option_spec& s,
                       const json& value) {
  // Replacing bad UTF-8: a --set value is any bytes the shell passed.
  return config_error(source + ": " + key + ": expected " + describe(s) + ", got "
                      + value.dump(-1, ' ', false, json::error_handler_t::replace));
}

// A text value: valid UTF-8, and one of the key's choices where it has some.
json checked_text(const std::string& source, const std::string& key, const option_spec& s,
                  const json& value) {
  if (!value.is_string())
    throw bad_value(source, key, s, value);
  // summary.json and `kvtier config` print every value: text must be valid UTF-8.
  try {
    (void)value.dump();
  } catch (const json::type_error&) {
    throw config_error(source + ": " + key + ": expected text in UTF-8, got " +
                       value.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  const std::string& t = value.get_ref<const std::string&>();
  bool allowed = s.choices.empty();
  for (const char* c : s.choices)
    allowed = allowed || t == c;
  if (!allowed)
    throw bad_value(source, key, s, value);
  return value;
}

// The value to store for a non-null `value` of key `s`; throws config_error when it does not fit.
json checked_value(const std::string& source, const std::string& key, const option_spec& s,
                   const json& value) {
  auto bad = [&] { return bad_value(source, key, s, value); };
  switch (s.type) {
    case option_type::integer: {
      if (!value.is_number())
        throw bad();
      double d = value.get<double>();
      if (!std::isfinite(d) || std::floor(d) != d || d < s.min || d > s.max)
        throw bad();
      return static_cast<int64_t>(d);
    }
    case option_type::number:
      if (!value.is_number())
        throw bad();
      // NaN compares false with every bound: refuse it (and infinities) by name.
      if (!std::isfinite(value.get<double>()) || value.get<double>() < s.min ||
          value.get<double>() > s.max)
        throw bad();
      return value.get<double>();
    case option_type::boolean:
      if (!value.is_boolean())
        throw bad();
      return value;
    case option_type::list:
      if (!value.is_array())
        throw bad();
      return value;
    case option_type::text_list:
      if (!value.is_array())
        throw bad();
      for (const auto& e : value)
        if (!e.is_string() || e.get_ref<const std::string&>().empty())
          throw bad();
      return value;
    case option_type::text:
      return checked_text(source, key, s, value);
  }
  throw bad();  // not reached: the switch names every option_type
}

}  // namespace

const std::vector<option_spec>& option_specs() {
  return specs();
}

const option_spec& option_spec_of(key_name key) {
  return specs()[index_of(key.name)];
}

std::string expected_value_text(const option_spec& spec) {
  return describe(spec);
}

std::string valid_keys_text() {
  std::string out;
  for (const auto& s : specs())
    out += std::string("  ") + s.key + " (" + describe(s) + "): " + s.help + "\n";
  return out;
}

config::config() : values_(specs().size()), sources_(specs().size()) {
  // The defaults are parsed once per process and copied after: a sweep builds a config per cell,
  // and parsing them was most of a config's cost.
  static const config* const defaults = [] {
    static config built(nullptr);
    built.merge_json(parse_json_strict(default_config_json, "configs/default.json"),
                     "configs/default.json");
    for (size_t i = 0; i < specs().size(); ++i)
      if (!specs()[i].optional && built.values_[i].is_null())
        throw config_error(std::string("configs/default.json lacks ") + specs()[i].key);
    return &built;
  }();
  values_ = defaults->values_;
  sources_ = defaults->sources_;
}

config::config(std::nullptr_t) : values_(specs().size()), sources_(specs().size()) {}

void config::merge_file(const std::string& path) {
  json j = read_json_file(path, "config file");
  if (!j.is_object())
    throw config_error(path + ": expected a JSON object of config keys");
  merge_json(j, path);
}

void config::merge_json(const json& j, const std::string& source) {
  std::vector<std::pair<std::string, json>> flat;
  flatten(j, "", flat);
  for (auto& [key, value] : flat)
    assign(key, value, source);
}

void config::set(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw config_error("--set " + assignment + ": expected key=value");
  std::string key = assignment.substr(0, eq);
  if (is_secret_key(key))  // the message names the key, never the value
    throw config_error("--set " + key + "=...: " + secret_refusal(key));
  std::string text = assignment.substr(eq + 1);
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded())
    value = text;  // plain text such as write_back
  assign(key, value, "--set " + assignment);
}

void config::assign(const std::string& key, const json& value, const std::string& source) {
  size_t i = index_for(key, source);
  const option_spec& s = specs()[i];
  if (value.is_null()) {
    if (!s.optional)
      throw bad_value(source, key, s, value);
    values_[i] = nullptr;
    sources_[i] = source;  // an explicit null, too, keeps a preset's value away
    return;
  }
  for (const auto& [a, b] : unit_pairs) {
    if (key != a.name && key != b.name)
      continue;
    size_t partner = index_of(key == a.name ? b.name : a.name);
    if (!values_[partner].is_null() && sources_[partner] == source)
      throw config_error(source + ": set only one of " + a.name + " and " + b.name);
    values_[partner] = nullptr;
  }
  sources_[i] = source;
  values_[i] = checked_value(source, key, s, value);
  const json* preset = nullptr;
  if (key == keys::preset::model.name)
    preset = &model_preset(values_[i].get<std::string>());
  else if (key == keys::preset::gpu.name)
    preset = &gpu_preset(values_[i].get<std::string>());
  if (!preset)
    return;
  // A preset fills in what no file or --set chose, whichever came first (docs/models.md).
  std::string preset_source = key + "=" + values_[i].get<std::string>();
  for (auto it = preset->begin(); it != preset->end(); ++it) {
    size_t j = index_of(it.key());
    const std::string& from = sources_[j];
    if (from != "configs/default.json" && from.rfind("preset.", 0) != 0)
      continue;
    sources_[j] = preset_source;
    values_[j] = it->is_null() ? json() : checked_value(preset_source, it.key(), specs()[j], *it);
  }
}

const json& config::value(key_name key) const {
  const json& v = values_[index_of(key.name)];
  if (v.is_null())
    throw config_error(std::string(key.name) + " is not set");
  return v;
}

bool config::is_set(key_name key) const {
  return !values_[index_of(key.name)].is_null();
}

bool config::is_default(key_name key) const {
  return sources_[index_of(key.name)] == "configs/default.json";
}

int64_t config::integer(integer_key key) const {
  return value(key).get<int64_t>();
}

double config::number(number_key key) const {
  return value(key).get<double>();
}

const std::string& config::text(text_key key) const {
  return value(key).get_ref<const std::string&>();
}

bool config::boolean(boolean_key key) const {
  return value(key).get<bool>();
}

const json& config::list(list_key key) const {
  return value(key);
}

std::vector<std::string> config::text_list(text_list_key key) const {
  return value(key).get<std::vector<std::string>>();
}

const char* to_string(value_origin o) {
  switch (o) {
    case value_origin::defaults: return "default";
    case value_origin::preset: return "preset";
    case value_origin::file: return "file";
    case value_origin::set: return "set";
    case value_origin::cluster_override: return "cluster override";
  }
  return "?";
}

const json& config::value_of(const std::string& key) const {
  return values_[index_of(key)];
}

// The sources assign() records: "configs/default.json", "preset.model=...", "--set k=v", a
// group's "cluster.instances[i].overrides" (cluster_config.cpp), else a file or a sweep cell.
value_source config::source_of(const std::string& key) const {
  const std::string& where = sources_[index_of(key)];
  auto starts = [&](const char* prefix) { return where.rfind(prefix, 0) == 0; };
  value_origin origin = value_origin::file;
  if (where == "configs/default.json")
    origin = value_origin::defaults;
  else if (starts("preset."))
    origin = value_origin::preset;
  else if (starts("--set "))
    origin = value_origin::set;
  else if (starts("cluster.instances["))
    origin = value_origin::cluster_override;
  return {origin, where};
}

json config::effective() const {
  json out = json::object();
  for (size_t i = 0; i < specs().size(); ++i) {
    std::string key = specs()[i].key;
    json* node = &out;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
      node = &(*node)[key.substr(start, dot - start)];
    (*node)[key.substr(start)] = values_[i];
  }
  return out;
}

}  // namespace kvtier
