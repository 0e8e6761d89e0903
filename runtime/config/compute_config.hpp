#pragma once

// What the model.*, gpu.*, parallel.* and compute.* keys resolve to: the model's description
// and its split over ranks (for every replay) and the step cost model (for timed replays).

#include "core/gpu_spec.hpp"
#include "core/model_spec.hpp"
#include "model/scheduler/cost_model.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"

namespace kvtier {

/// model.*; throws config_error naming the key on an inconsistent description.
model_spec resolve_model_spec(const config& c);
/// parallel.*, checked against the model it splits.
parallelism resolve_parallelism(const config& c, const model_spec& m);
gpu_spec resolve_gpu_spec(const config& c);
/// compute.*, with the roofline's model, GPU and split.
compute_profile resolve_compute(const config& c, const model_spec& m, const parallelism& p);
/// summary.json's `model` section (docs/outputs.md): the KV and FLOPs the model.* keys derive.
nlohmann::json model_summary(const config& c, const replay_config& rc);

}  // namespace kvtier
