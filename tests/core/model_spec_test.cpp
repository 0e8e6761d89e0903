#include "core/model_spec.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

// Llama-3-70B's config.json: 80 layers, 64 heads, 8 KV heads, head_dim 128.
model_spec llama3_70b() {
  model_spec m;
  m.params = m.active_params = 70.6e9;
  m.layers = 80;
  m.hidden_size = 8192;
  m.attention_heads = 64;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = "bf16";
  return m;
}

// DeepSeek-V3's config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64.
model_spec deepseek_v3() {
  model_spec m;
  m.params = 671e9;
  m.active_params = 37e9;
  m.layers = 61;
  m.hidden_size = 7168;
  m.attention_heads = 128;
  m.kv_heads = 128;
  m.head_dim = 128;
  m.kv_lora_rank = 512;
  m.rope_head_dim = 64;
  m.experts = 256;
  m.active_experts = 8;
  m.kv_dtype = "bf16";
  m.weight_dtype_bytes = 1;
  return m;
}

}  // namespace

TEST_CASE("model_spec: KV bytes per token, separate K and V and MLA's latent", "[core][model]") {
  CHECK(kv_bytes_per_token(llama3_70b()) == 2ull * 80 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(deepseek_v3()) == 61ull * (512 + 64) * 2);
  CHECK(kv_bytes_per_token(deepseek_v3()) == 70272);
  model_spec fp8 = deepseek_v3();
  fp8.kv_dtype_bytes = 1;
  CHECK(kv_bytes_per_token(fp8) == 35136);
}

TEST_CASE("model_spec: TP splits KV heads, PP splits layers, MLA's latent is replicated",
          "[core][model]") {
  model_spec m = llama3_70b();
  uint64_t whole = kv_bytes_per_token(m);
  CHECK(shape_per_rank(m, {1, 1}).bytes_per_token() == whole);
  CHECK(shape_per_rank(m, {2, 1}).bytes_per_token() == whole / 2);
  CHECK(shape_per_rank(m, {8, 1}).bytes_per_token() == whole / 8);
  // Past the KV heads, ranks hold replicas of one head each.
  CHECK(shape_per_rank(m, {16, 1}).bytes_per_token() == whole / 8);
  CHECK(shape_per_rank(m, {1, 4}).bytes_per_token() == whole / 4);
  CHECK(kv_bytes_per_token_split(m, {2, 1}) == Approx(whole / 2.0));
  model_spec d = deepseek_v3();
  CHECK(shape_per_rank(d, {8, 1}).bytes_per_token() == 70272);
  CHECK(kv_bytes_per_token_split(d, {8, 1}) == Approx(70272));
}

TEST_CASE("model_spec: FLOPs per token and MoE weights read", "[core][model]") {
  model_spec m = llama3_70b();
  CHECK(dense_flops_per_token(m) == Approx(2 * 70.6e9));
  CHECK(attention_flops_per_pair(m) == Approx(2.0 * 80 * 64 * (128 + 128)));
  CHECK(weight_bytes_read(m, 1) == Approx(70.6e9 * 2));
  model_spec d = deepseek_v3();
  CHECK(dense_flops_per_token(d) == Approx(2 * 37e9));
  CHECK(attention_flops_per_pair(d) == Approx(2.0 * 61 * 128 * (128 + 64 + 128)));
  // One token reads its 8 of 256 experts: the active parameters; many tokens read nearly all.
  CHECK(weight_bytes_read(d, 1) == Approx(37e9).epsilon(1e-9));
  CHECK(weight_bytes_read(d, 4096) == Approx(671e9).epsilon(1e-6));
  CHECK(weight_bytes_read(d, 32) < weight_bytes_read(d, 256));
}
