#pragma once

// What a model is, in the figures its config.json gives (docs/models.md): the description the
// roofline step model (model/scheduler/roofline.hpp) computes from, and the KV shape every rank
// of a tensor- and pipeline-parallel instance caches. model_shape (model_shape.hpp) stays the
// per-rank KV shape that transfers, blocks and the serve protocol use.

#include <cstdint>
#include <string>

#include "core/model_shape.hpp"

namespace kvtier {

struct model_spec {
  std::string name;
  double params = 0;         ///< all weights
  double active_params = 0;  ///< weights one token passes through (MoE: shared + routed experts)
  uint32_t layers = 0;
  uint32_t hidden_size = 0;
  uint32_t attention_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;       ///< MLA: the no-rope part of a query/key head, also V's head
  uint32_t kv_lora_rank = 0;   ///< MLA latent (DeepSeek-V2/V3); 0: separate K and V per head
  uint32_t rope_head_dim = 0;  ///< MLA: the rope part, cached beside the latent
  uint32_t experts = 0;        ///< routed experts; 0: dense
  uint32_t active_experts = 0;
  std::string kv_dtype = "bf16";
  double kv_bits = 16;         ///< bits of one KV element, its share of block scales included
  std::string weight_dtype = "bf16";
  double weight_bits = 16;     ///< bits of one weight, its share of group scales included

  bool latent_kv() const { return kv_lora_rank > 0; }
};

/// How an instance's ranks split a model: tensor parallel within a layer, pipeline over layers.
struct parallelism {
  uint32_t tp = 1;
  uint32_t pp = 1;
  /// Micro-batches a step's batch is cut into so that pipeline stages overlap; 1: the stages
  /// run one after another (docs/models.md, "Pipeline stages").
  uint32_t pp_microbatches = 1;
};

/// KV of every layer for one token, one copy: MLA caches one latent of kv_lora_rank + rope dims
/// per layer; other attention a K and a V per KV head.
uint64_t kv_bytes_per_token(const model_spec& m);
/// KV heads a rank holds: TP splits them; a rank past the last one holds a replica of one.
/// MLA's latent is not split by head, so every TP rank holds all of it.
uint32_t kv_heads_per_rank(const model_spec& m, const parallelism& p);
/// Layers a rank holds: PP gives each stage a contiguous run, the first stages one more.
uint32_t layers_per_rank(const model_spec& m, const parallelism& p);
/// The KV one rank caches: what its blocks hold and its links move.
model_shape shape_per_rank(const model_spec& m, const parallelism& p);
/// The KV one rank reads or writes per token over all layers of the step, the stages one after
/// the other: the whole model's, divided by TP where the heads split.
double kv_bytes_per_token_split(const model_spec& m, const parallelism& p);

/// Which form of attention a step's tokens run: a prefill attends over expanded heads; a decode
/// step of an MLA model attends in the latent space, the up-projections absorbed into the
/// query and output (DeepSeek-V2 paper, section 2.1.3; vLLM's and SGLang's MLA decode).
enum class attention_phase { prefill, decode };

/// Matrix-multiply FLOPs of one token through the weights (2 per multiply-add).
double dense_flops_per_token(const model_spec& m);
/// Attention FLOPs of one token against one context token, all layers, 2 per multiply-add:
/// QK^T over the query/key head and PV over the value head. MLA's decode works on the cached
/// latent: QK^T over kv_lora_rank + rope_head_dim and PV over kv_lora_rank, per head.
double attention_flops_per_pair(const model_spec& m, attention_phase phase);
/// Bytes of all weights.
double weight_bytes(const model_spec& m);
/// Bytes of the weights a step of `tokens` tokens reads: all of a dense model's; of an MoE only
/// the experts some token is routed to, the expected share if routing is uniform.
double weight_bytes_read(const model_spec& m, double tokens);
/// Routed experts of each MoE layer that some token of a step of `tokens` tokens goes to, the
/// expected number if routing is uniform: experts x (1 - (1 - active / experts)^tokens); 0 for
/// a dense model.
double experts_touched(const model_spec& m, double tokens);

/// Bits of one element of a KV or weight dtype name, block or group scales included
/// (docs/models.md, "Element types"); 0 for a name that is none of them.
double dtype_bits(const std::string& dtype);
/// Bytes `elements` elements of `bits` bits take, rounded up to a whole byte.
uint64_t packed_bytes(uint64_t elements, double bits);

}  // namespace kvtier
