#include "runtime/config/compute_config.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace kvtier;

namespace {

replay_config with(std::initializer_list<const char*> sets) {
  config c;
  for (const char* s : sets)
    c.set(s);
  return resolve(c);
}

// The model alone, through its keys, without fitting a deployment into a GPU.
model_spec spec_with(std::initializer_list<const char*> sets) {
  config c;
  for (const char* s : sets)
    c.set(s);
  return resolve_model_spec(c);
}

std::string error_of(std::initializer_list<const char*> sets) {
  try {
    with(sets);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("presets: KV bytes per token match each model's config.json", "[runtime][preset]") {
  // 2 (K and V) x layers x KV heads x head_dim x 2 bytes (bf16); MLA: layers x (512 + 64) x 2.
  CHECK(with({"preset.model=llama3-8b"}).spec.name == "llama3-8b");
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama3-8b"})) == 2ull * 32 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama3-70b"})) == 2ull * 80 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=qwen2.5-7b"})) == 2ull * 28 * 4 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=mixtral-8x7b"})) ==
        2ull * 32 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=deepseek-v3"})) == 61ull * (512 + 64) * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama2-7b"})) == 2ull * 32 * 32 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama2-13b"})) == 2ull * 40 * 40 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama2-70b"})) == 2ull * 80 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=qwen3-8b"})) == 2ull * 36 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=qwen3-235b-a22b"})) ==
        2ull * 94 * 4 * 128 * 2);
  CHECK(with({"preset.model=deepseek-v3", "parallel.tp=8"}).block_bytes() == 70272ull * 64);
  // Keys whose default is null take the preset's value too.
  CHECK(spec_with({"preset.model=mixtral-8x7b"}).active_params == Approx(12.9e9));
  CHECK(spec_with({"preset.model=deepseek-v3"}).active_params == Approx(37e9));
}

TEST_CASE("presets: parallel.tp halves the KV a rank holds", "[runtime][preset]") {
  uint64_t one = kv_bytes_per_token(spec_with({"preset.model=llama3-70b"}));
  CHECK(with({"preset.model=llama3-70b", "parallel.tp=2"}).model.bytes_per_token() == one / 2);
  CHECK(with({"preset.model=llama3-70b", "parallel.tp=8"}).model.bytes_per_token() == one / 8);
  // MLA's latent is not split by head: every rank of a TP-8 node holds all of it.
  CHECK(with({"preset.model=deepseek-v3", "parallel.tp=8"}).model.bytes_per_token() == 70272);
}

TEST_CASE("presets: explicit keys win over a preset, whichever comes first",
          "[runtime][preset]") {
  CHECK(kv_bytes_per_token(spec_with({"model.kv_dtype=fp8", "preset.model=deepseek-v3"})) ==
        35136);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=deepseek-v3", "model.kv_dtype=fp8"})) ==
        35136);
  config c;
  c.set("preset.gpu=h100-sxm");
  CHECK(c.text(keys::compute::model) == "roofline");
  CHECK(c.number(keys::gpu::hbm_gbps) == 3350);
  config linear;
  linear.set("compute.model=linear");
  linear.set("preset.gpu=b200");
  CHECK(linear.text(keys::compute::model) == "linear");
  CHECK(linear.text(keys::gpu::name) == "b200");
  // A second preset replaces the first one's keys.
  config twice;
  twice.set("preset.gpu=a100");
  twice.set("preset.gpu=h200");
  CHECK(twice.number(keys::gpu::hbm_gbps) == 4800);
}

TEST_CASE("presets: the default config stays linear with Llama-3-8B's KV", "[runtime][preset]") {
  config c;
  CHECK(c.text(keys::compute::model) == "linear");
  CHECK(resolve(c).model.bytes_per_token() == 131072);
}

TEST_CASE("presets: bad names and splits are refused, naming the key", "[runtime][preset]") {
  CHECK_THAT(error_of({"preset.model=llama-9"}), Catch::Contains("preset.model"));
  CHECK_THAT(error_of({"preset.gpu=h900"}), Catch::Contains("preset.gpu"));
  CHECK_THAT(error_of({"preset.model=llama3-8b", "parallel.tp=3"}),
             Catch::Contains("parallel.tp"));
  CHECK_THAT(error_of({"model.experts=8", "model.active_experts=9"}),
             Catch::Contains("model.active_experts"));
  CHECK_THAT(error_of({"model.kv_lora_rank=512"}), Catch::Contains("model.kv_lora_rank"));
}

TEST_CASE("presets: int8, int4 and fp4 weights and KV are accepted, sized by their bits",
          "[runtime][preset]") {
  CHECK(spec_with({"preset.model=llama3-70b", "model.weight_dtype=int8"}).weight_bits == 8);
  CHECK(spec_with({"preset.model=llama3-70b", "model.weight_dtype=int4"}).weight_bits == 4.25);
  CHECK(spec_with({"preset.model=llama3-70b", "model.weight_dtype=fp4"}).weight_bits == 4.5);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama3-8b", "model.kv_dtype=int8"})) ==
        65536);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama3-8b", "model.kv_dtype=int4"})) ==
        32ull * 1088);
  CHECK(kv_bytes_per_token(spec_with({"preset.model=llama3-8b", "model.kv_dtype=fp4"})) ==
        32ull * 1152);
  // A replay sizes its blocks from them.
  CHECK(with({"preset.model=llama3-8b", "model.kv_dtype=fp4"}).block_bytes() ==
        32ull * 1152 * 64);
  CHECK_THAT(error_of({"model.weight_dtype=int3"}), Catch::Contains("model.weight_dtype"));
}

TEST_CASE("memory: a deployment whose weights cannot fit is refused with the numbers",
          "[runtime][preset][memory]") {
  std::string e = error_of({"preset.model=deepseek-v3", "preset.gpu=a100"});
  CHECK_THAT(e, Catch::Contains("does not fit"));
  CHECK_THAT(e, Catch::Contains("deepseek-v3"));
  CHECK_THAT(e, Catch::Contains("a100"));
  CHECK_THAT(e, Catch::Contains("624.9 GiB of weights"));  // 671e9 FP8 bytes on one rank
  CHECK_THAT(e, Catch::Contains("72.0 GiB"));               // 80 GiB x 0.9
  CHECK_THAT(e, Catch::Contains("parallel.tp"));
  // Eight H200s hold it.
  CHECK(error_of({"preset.model=deepseek-v3", "preset.gpu=h200", "parallel.tp=8"}).empty());
  // The linear model describes no GPU memory: nothing to check.
  CHECK(error_of({"preset.model=deepseek-v3", "compute.model=linear"}).empty());
}

TEST_CASE("memory: the device tier defaults, under a preset, to what the HBM left holds",
          "[runtime][preset][memory]") {
  config c;
  c.set("preset.model=llama3-8b");
  c.set("preset.gpu=h100-sxm");
  replay_config r = resolve(c);
  rank_memory m = rank_memory_of(c, r.spec, r.parallel, r.model);
  double gib = 1024.0 * 1024 * 1024;
  CHECK(m.usable == Approx(80 * 0.9 * gib));
  CHECK(m.weights == Approx(8.03e9 * 2));
  CHECK(m.activations == Approx(8192.0 * 4096 * 40));
  CHECK(m.reserve == Approx(1.79 * gib));
  CHECK(m.kv_per_token == 131072);
  uint64_t blocks = static_cast<uint64_t>(m.free_for_kv() / (131072.0 * 64));
  CHECK(r.cache.device_blocks == blocks);
  CHECK(blocks > 6000);  // about 54 GiB of KV
  // Two ranks: half the weights each, twice the reserve, half the KV per token.
  config tp2 = c;
  tp2.set("parallel.tp=2");
  replay_config r2 = resolve(tp2);
  rank_memory m2 = rank_memory_of(tp2, r2.spec, r2.parallel, r2.model);
  CHECK(m2.weights == Approx(8.03e9));
  CHECK(m2.reserve == Approx(3.58 * gib));
  CHECK(r2.cache.device_blocks == static_cast<uint64_t>(m2.free_for_kv() / (65536.0 * 64)));
}

TEST_CASE("memory: an explicit device tier is kept where it fits and refused where not",
          "[runtime][preset][memory]") {
  CHECK(with({"preset.model=llama3-8b", "preset.gpu=h100-sxm", "cache.device_tokens=64000"})
          .cache.device_blocks == 1000);
  std::string e = error_of({"preset.model=llama3-8b", "preset.gpu=h100-sxm",
                            "cache.device_tokens=800000"});
  CHECK_THAT(e, Catch::Contains("cache.device_tokens"));
  CHECK_THAT(e, Catch::Contains("do not fit"));
  CHECK_THAT(e, Catch::Contains("at most"));
  // compute.hbm_utilization and the reserve move the line.
  CHECK(error_of({"preset.model=llama3-8b", "preset.gpu=h100-sxm", "cache.device_tokens=400000",
                  "compute.hbm_utilization=0.95", "compute.runtime_reserve_gib=0"})
          .empty());
}
