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
  CHECK(kv_bytes_per_token(with({"preset.model=llama3-8b"}).spec) == 2ull * 32 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(with({"preset.model=llama3-70b"}).spec) == 2ull * 80 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(with({"preset.model=qwen2.5-7b"}).spec) == 2ull * 28 * 4 * 128 * 2);
  CHECK(kv_bytes_per_token(with({"preset.model=mixtral-8x7b"}).spec) == 2ull * 32 * 8 * 128 * 2);
  CHECK(kv_bytes_per_token(with({"preset.model=deepseek-v3"}).spec) == 61ull * (512 + 64) * 2);
  CHECK(with({"preset.model=deepseek-v3"}).block_bytes() == 70272ull * 64);
  // Keys whose default is null take the preset's value too.
  CHECK(with({"preset.model=mixtral-8x7b"}).spec.active_params == Approx(12.9e9));
  CHECK(with({"preset.model=deepseek-v3"}).spec.active_params == Approx(37e9));
}

TEST_CASE("presets: parallel.tp halves the KV a rank holds", "[runtime][preset]") {
  uint64_t one = with({"preset.model=llama3-70b"}).model.bytes_per_token();
  CHECK(with({"preset.model=llama3-70b", "parallel.tp=2"}).model.bytes_per_token() == one / 2);
  CHECK(with({"preset.model=llama3-70b", "parallel.tp=8"}).model.bytes_per_token() == one / 8);
  // MLA's latent is not split by head: every rank of a TP-8 node holds all of it.
  CHECK(with({"preset.model=deepseek-v3", "parallel.tp=8"}).model.bytes_per_token() == 70272);
}

TEST_CASE("presets: explicit keys win over a preset, whichever comes first",
          "[runtime][preset]") {
  CHECK(with({"model.kv_dtype=fp8", "preset.model=deepseek-v3"}).model.bytes_per_token() ==
        35136);
  CHECK(with({"preset.model=deepseek-v3", "model.kv_dtype=fp8"}).model.bytes_per_token() ==
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
