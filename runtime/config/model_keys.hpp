#pragma once

// The model.* config keys: the model whose KV is cached (its shape sets the bytes per block; its
// name and dtype go into every storage key) and, for compute.model=roofline, what it computes
// (core/model_spec.hpp). Read by replay_config.cpp; set together by preset.model.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in model_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::model {

inline constexpr text_key name{"model.name"};
inline constexpr integer_key layers{"model.layers"};
inline constexpr integer_key kv_heads{"model.kv_heads"};
inline constexpr integer_key head_dim{"model.head_dim"};
inline constexpr text_key kv_dtype{"model.kv_dtype"};
inline constexpr number_key params_b{"model.params_b"};
inline constexpr number_key active_params_b{"model.active_params_b"};
inline constexpr integer_key hidden_size{"model.hidden_size"};
inline constexpr integer_key attention_heads{"model.attention_heads"};
inline constexpr integer_key kv_lora_rank{"model.kv_lora_rank"};
inline constexpr integer_key rope_head_dim{"model.rope_head_dim"};
inline constexpr integer_key experts{"model.experts"};
inline constexpr integer_key active_experts{"model.active_experts"};
inline constexpr text_key weight_dtype{"model.weight_dtype"};

}  // namespace keys::model

/// The model.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> model_key_specs();

}  // namespace kvtier
