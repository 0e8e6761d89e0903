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
  m.weight_dtype = "fp8";
  m.weight_bits = 8;
  return m;
}

}  // namespace

TEST_CASE("model_spec: KV bytes per token, separate K and V and MLA's latent", "[core][model]") {
  CHECK(kv_bytes_per_token(llama3_70b()) == 2ull * 80 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(deepseek_v3()) == 61ull * (512 + 64) * 2);
  CHECK(kv_bytes_per_token(deepseek_v3()) == 70272);
  model_spec fp8 = deepseek_v3();
  fp8.kv_bits = 8;
  CHECK(kv_bytes_per_token(fp8) == 35136);
}

TEST_CASE("model_spec: element types in bits, 4-bit ones with their scales", "[core][model]") {
  CHECK(dtype_bits("bf16") == 16);
  CHECK(dtype_bits("fp16") == 16);
  CHECK(dtype_bits("fp8") == 8);
  CHECK(dtype_bits("int8") == 8);
  CHECK(dtype_bits("int4") == 4.25);  // a 16-bit scale and zero per 128 values
  CHECK(dtype_bits("fp4") == 4.5);    // NVFP4: an FP8 scale per 16 values
  CHECK(dtype_bits("fp5") == 0);
  CHECK(packed_bytes(128, 4.25) == 68);
  CHECK(packed_bytes(576, 4.5) == 324);
  CHECK(packed_bytes(3, 4.5) == 2);  // rounded up to whole bytes
  // Llama-3-70B's 2 x 8 x 128 KV elements per layer in int4: 2048 x 4.25 / 8 bytes.
  model_spec m = llama3_70b();
  m.kv_dtype = "int4";
  m.kv_bits = 4.25;
  CHECK(kv_bytes_per_token(m) == 80ull * 1088);
  model_shape s = shape_per_rank(m, {2, 1});
  CHECK(s.dtype_bytes == 0);
  CHECK(s.packed_layer_bytes == 544);  // 4 KV heads on each of 2 ranks
  CHECK(s.bytes_per_token() == 80ull * 544);
  CHECK(kv_bytes_per_token_split(m, {2, 1}) == Approx(80.0 * 544));
  model_spec d = deepseek_v3();
  d.kv_dtype = "fp4";
  d.kv_bits = 4.5;
  CHECK(kv_bytes_per_token(d) == 61ull * 324);
  CHECK(shape_per_rank(d, {8, 1}).bytes_per_token() == 61ull * 324);
  // Weights: bytes follow the bits.
  model_spec w = llama3_70b();
  w.weight_bits = 4.25;
  CHECK(weight_bytes(w) == Approx(70.6e9 * 4.25 / 8));
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
  CHECK(attention_flops_per_pair(m, attention_phase::prefill) ==
        Approx(2.0 * 80 * 64 * (128 + 128)));
  CHECK(attention_flops_per_pair(m, attention_phase::decode) ==
        attention_flops_per_pair(m, attention_phase::prefill));
  CHECK(weight_bytes_read(m, 1) == Approx(70.6e9 * 2));
  CHECK(weight_bytes(m) == Approx(70.6e9 * 2));
  model_spec d = deepseek_v3();
  CHECK(dense_flops_per_token(d) == Approx(2 * 37e9));
  // Prefill attends over expanded heads: q/k 128 + 64 rope, v 128.
  CHECK(attention_flops_per_pair(d, attention_phase::prefill) ==
        Approx(2.0 * 61 * 128 * (128 + 64 + 128)));
  // Decode attends in the latent: q.k over 512 + 64, p.v over 512: 1,088 per head, not 320.
  CHECK(attention_flops_per_pair(d, attention_phase::decode) ==
        Approx(2.0 * 61 * 128 * (512 + 64 + 512)));
  // One token reads its 8 of 256 experts: the active parameters; many tokens read nearly all.
  CHECK(weight_bytes_read(d, 1) == Approx(37e9).epsilon(1e-9));
  CHECK(weight_bytes_read(d, 4096) == Approx(671e9).epsilon(1e-6));
  CHECK(weight_bytes_read(d, 32) < weight_bytes_read(d, 256));
}
