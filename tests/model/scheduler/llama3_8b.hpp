#pragma once

// Llama-3-8B's shape as the step-model tests use it (bf16 KV): 8.03 B parameters, 32 layers,
// hidden 4096, 32 attention heads, 8 KV heads of 128.

#include "core/model_spec.hpp"

namespace kvtier::test {

inline model_spec llama3_8b() {
  model_spec m;
  m.params = m.active_params = 8.03e9;
  m.layers = 32;
  m.hidden_size = 4096;
  m.attention_heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = "bf16";
  return m;
}

}  // namespace kvtier::test
