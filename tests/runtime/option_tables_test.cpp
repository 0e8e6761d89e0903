// The options tables (one per section, runtime/config/*_keys.cpp) against configs/default.json:
// a key added to one and not the other, or a section whose table is left out of the assembled
// table, fails here rather than in a run.

#include <catch2/catch.hpp>

#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/config/default_config.hpp"
#include "runtime/config/keys.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/strict_json.hpp"

using namespace kvtier;
using nlohmann::json;

namespace {

// Reads take named keys only: text does not become a key, and a key of one type is not another.
static_assert(!std::is_convertible_v<const char*, key_name>);
static_assert(!std::is_convertible_v<std::string, key_name>);
static_assert(!std::is_convertible_v<text_key, integer_key>);
static_assert(!std::is_invocable_v<decltype(&config::integer), const config&, text_key>);
static_assert(std::is_invocable_v<decltype(&config::integer), const config&, integer_key>);

using section_table = std::pair<const char*, std::function<std::vector<option_spec>()>>;

// In configs/default.json's order, which is the order `kvtier config` lists the keys in.
const std::vector<section_table> sections = {
  {"cache", cache_key_specs},     {"storage", storage_key_specs}, {"trace", trace_key_specs},
  {"scheduler", scheduler_key_specs}, {"compute", compute_key_specs},
  {"links", links_key_specs},     {"cluster", cluster_key_specs}, {"router", router_key_specs},
  {"pd", pd_key_specs},           {"faults", faults_key_specs},   {"serve", serve_key_specs},
  {"model", model_key_specs},     {"gpu", gpu_key_specs},         {"parallel", parallel_key_specs},
  {"preset", preset_key_specs},   {"output", output_key_specs},
  {"slo", slo_key_specs},
};

json defaults() {
  return parse_json_strict(default_config_json, "configs/default.json");
}

void flat_keys(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flat_keys(*it, key, out);
    else
      out.push_back(key);
  }
}

std::vector<std::string> keys_of(const std::vector<option_spec>& table) {
  std::vector<std::string> out;
  for (const option_spec& s : table)
    out.push_back(s.key);
  return out;
}

}  // namespace

TEST_CASE("option tables: exactly the keys of configs/default.json", "[config]") {
  std::vector<std::string> file;
  flat_keys(defaults(), "", file);
  std::vector<std::string> table = keys_of(option_specs());
  std::set<std::string> file_set(file.begin(), file.end()), table_set(table.begin(), table.end());
  CHECK(table_set.size() == table.size());  // no key has two rows
  for (const std::string& k : file) {
    INFO("configs/default.json has " << k << ", which no options table lists");
    CHECK(table_set.count(k) == 1);
  }
  for (const std::string& k : table) {
    INFO("the options tables list " << k << ", which configs/default.json lacks");
    CHECK(file_set.count(k) == 1);
  }
}

TEST_CASE("option tables: one table per section of configs/default.json, all assembled",
          "[config]") {
  json d = defaults();
  std::vector<std::string> file_sections, listed;
  for (auto it = d.begin(); it != d.end(); ++it)
    file_sections.push_back(it.key());
  std::vector<std::string> assembled;
  for (const auto& [name, table] : sections) {
    listed.push_back(name);
    std::vector<std::string> keys = keys_of(table());
    CHECK_FALSE(keys.empty());
    std::vector<std::string> in_file;
    flat_keys(d[name], std::string(name), in_file);
    INFO("section " << name);
    CHECK(std::set<std::string>(keys.begin(), keys.end()) ==
          std::set<std::string>(in_file.begin(), in_file.end()));
    assembled.insert(assembled.end(), keys.begin(), keys.end());
  }
  // nlohmann::json keeps objects sorted, so compare the sections as sets.
  CHECK(std::set<std::string>(listed.begin(), listed.end()) ==
        std::set<std::string>(file_sections.begin(), file_sections.end()));
  // The assembled table is the section tables, whole and in order: what `kvtier config` lists.
  CHECK(keys_of(option_specs()) == assembled);
}

TEST_CASE("option tables: a key constant reads the row of its own name", "[config]") {
  config c;
  CHECK(std::string(option_spec_of(keys::cache::block_size).key) == "cache.block_size");
  CHECK(option_spec_of(keys::storage::prefetch_timeout_per_ki_token_ms).type ==
        option_type::number);
  CHECK(option_spec_of(keys::cluster::instances).type == option_type::list);
  CHECK(c.integer(keys::cache::block_size) == 64);
  CHECK(c.text(keys::model::name) == "llama3-8b");
  CHECK(c.text_list(keys::storage::redis).empty());
  CHECK_FALSE(c.is_set(keys::storage::calibration));
}
