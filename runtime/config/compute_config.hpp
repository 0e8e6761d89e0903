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

/// What one rank of an instance holds in HBM (docs/models.md, "Memory must fit"), bytes.
struct rank_memory {
  double usable = 0;       ///< gpu.hbm_gib x compute.hbm_utilization
  double weights = 0;      ///< its share of the weights
  double activations = 0;  ///< the forward pass's workspace at scheduler.token_budget tokens
  double reserve = 0;      ///< CUDA context, NCCL buffers (compute.runtime_reserve_gib)
  double kv_per_token = 0;  ///< the KV of one token on this rank
  double free_for_kv() const { return usable - weights - activations - reserve; }
};
rank_memory rank_memory_of(const config& c, const model_spec& m, const parallelism& p,
                           const model_shape& per_rank);
/// Under compute.model=roofline: a device tier no file or --set sized becomes what the HBM left
/// after weights, activations and the reserve holds; a deployment whose weights do not fit, or
/// whose device tier does not, is refused with the numbers (config_error). Other compute models
/// describe no GPU memory and are left alone.
void fit_device_tier(const config& c, replay_config& rc);

}  // namespace kvtier
