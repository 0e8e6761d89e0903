#pragma once

// When does a step end, given when each layer's inputs arrive? Layer i computes once layer i-1 is
// computed and layer i's swapped-in blocks are in device memory:
//
//   end_-1  = start + overhead
//   end_i   = max(end_{i-1}, ready_i) + layer_i
//
// The stall is the time compute waited for data: sum of max(0, ready_i - end_{i-1}). A swap-in
// whose per-layer transfer is at most the per-layer compute is thus hidden behind compute, except
// for its first layer; a slower one is exposed.
//
// On a GPU each layer of a step that follows a swap-in also waits on that layer's copy event,
// which costs `layer_wait_ns` even when the data is in place (calibrated by `bench transfer`,
// docs/gpu.md "Benchmark"); it counts as stall:
//
//   end_i   = max(end_{i-1}, ready_i) + layer_wait + layer_i
//
// A step whose blocks are reused while an earlier copy still reads them (a backup of the blocks
// freed for it) starts its first layer only once that copy is done, at `reused_ready`:
//
//   end_-1  = max(start + overhead, reused_ready)
//
// That wait is the step's, not a swap-in's: it is reported apart (`reuse_wait_ns`), as the GPU
// backend, which submits the step's compute only once those copies are done, measures it.
//
// The host submits a step's swap-in before the step's compute, which waits on the copy's layer
// events and can be submitted only once they exist: the step starts `submit_per_block` x the
// swap-in's blocks after its commit (links.h2d_submit_us_per_block, fitted from a replay's steps;
// docs/gpu.md "The stall"). The scheduler passes that later start as `start_ns`.

#include <cstdint>
#include <vector>

#include "model/scheduler/cost_model.hpp"

namespace kvtier {

struct pipeline_result {
  int64_t end_ns = 0;
  int64_t stall_ns = 0;       ///< waits for swapped-in layers, and the layer waits
  int64_t reuse_wait_ns = 0;  ///< the wait for copies still reading reused blocks
};

/// `ready_ns` is empty (all inputs in place at `start_ns`) or has one time per layer.
/// With `layer_end_ns`, also when each layer's compute ended (a PD prefill streams each layer's
/// KV from then on).
/// `layer_wait_ns` is charged per layer only when the step follows a swap-in.
/// `reused_ready_ns`: when copies still reading reused blocks are done (0: none).
pipeline_result run_pipeline(int64_t start_ns, const step_cost& cost, uint32_t layers,
                             const std::vector<int64_t>& ready_ns,
                             std::vector<int64_t>* layer_end_ns = nullptr,
                             int64_t layer_wait_ns = 0, int64_t reused_ready_ns = 0);

}  // namespace kvtier
