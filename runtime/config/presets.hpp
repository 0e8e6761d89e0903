#pragma once

// The named models and GPUs of preset.model and preset.gpu: each a set of config keys, with the
// figure's public source in docs/models.md. A compiled table, so the binary knows them wherever
// it runs, as it knows configs/default.json.

#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier {

std::vector<const char*> model_preset_names();
std::vector<const char*> gpu_preset_names();
/// The keys preset `name` sets (flat, "model.layers": 32); throws std::out_of_range if unknown.
const nlohmann::json& model_preset(const std::string& name);
const nlohmann::json& gpu_preset(const std::string& name);

}  // namespace kvtier
