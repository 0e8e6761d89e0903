// Model and GPU presets from the command line: a replay states its model's KV bytes, bad names
// exit 2 naming the key, and `kvtier model-info` prints the predicted step times.

#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace cli_test;

TEST_CASE("cli: DeepSeek-V3 on a TP-8 H200 node replays with MLA's KV bytes", "[cli][model]") {
  fs::path out = scratch("deepseek");
  auto r = kvtier("replay --deterministic --quiet --out " + out.string() +
                  " --set preset.model=deepseek-v3 --set preset.gpu=h200 --set parallel.tp=8");
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(out);
  CHECK(s["model"]["kv_bytes_per_token"] == 70272);
  CHECK(s["model"]["kv_bytes_per_token_per_rank"] == 70272);
  CHECK(s["model"]["kv_layout"] == "latent");
  CHECK(s["model"]["tp"] == 8);
  CHECK(s["model"]["compute_model"] == "roofline");
  CHECK(s["invariants"]["violations"] == 0);
  fs::remove_all(out);
}

TEST_CASE("cli: a bad preset name exits 2 naming the key", "[cli][model][bad_input]") {
  auto model = kvtier("replay --set preset.model=gpt-9");
  CHECK(model.code == 2);
  CHECK(model.out.find("preset.model") != std::string::npos);
  CHECK(model.out.find("deepseek-v3") != std::string::npos);
  auto gpu = kvtier("model-info --set preset.gpu=h1000");
  CHECK(gpu.code == 2);
  CHECK(gpu.out.find("preset.gpu") != std::string::npos);
}

TEST_CASE("cli: model-info predicts prefill compute-bound and decode memory-bound",
          "[cli][model]") {
  auto r = kvtier("model-info --set preset.model=llama3-70b --set preset.gpu=h100-sxm "
                  "--set parallel.tp=2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  CHECK(j["model"]["kv_bytes_per_token"] == 327680);
  CHECK(j["model"]["kv_bytes_per_token_per_rank"] == 163840);
  REQUIRE(j["prefill"].size() == 3);
  CHECK(j["prefill"][1]["prompt_tokens"] == 8192);
  CHECK(j["prefill"][1]["bound"] == "compute");
  CHECK(j["decode"][0]["batch"] == 1);
  CHECK(j["decode"][0]["bound"] == "memory");
  CHECK(j["prefill"][2]["step_ms"].get<double>() > j["prefill"][0]["step_ms"].get<double>());
}

TEST_CASE("cli: a deployment that cannot fit its GPUs exits 2 with the numbers",
          "[cli][model][memory][bad_input]") {
  auto r = kvtier("replay --set preset.model=deepseek-v3 --set preset.gpu=a100");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(r.out.find("does not fit") != std::string::npos);
  CHECK(r.out.find("624.9 GiB of weights") != std::string::npos);
  CHECK(r.out.find("parallel.tp") != std::string::npos);
}

TEST_CASE("cli: int8, int4 and fp4 weights and KV are accepted", "[cli][model]") {
  auto r = kvtier("model-info --set preset.model=llama3-70b --set preset.gpu=b200 "
                  "--set model.weight_dtype=fp4 --set model.kv_dtype=fp8 --batch 8");
  INFO(r.out);
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  CHECK(j["model"]["weight_dtype"] == "fp4");
  CHECK(j["model"]["kv_bytes_per_token"] == 163840);
  for (const char* dtype : {"int8", "int4"}) {
    auto q = kvtier(std::string("model-info --set preset.model=llama3-8b --set model.kv_dtype=") +
                    dtype + " --set model.weight_dtype=" + dtype);
    CHECK(q.code == 0);
  }
}

// Runs the fit of docs/models.md (about 6 s of CPU): the committed tables and the GPU presets'
// fitted figures must be what a fresh fit gives.
TEST_CASE("cli: model-fit's tables and the GPU presets agree with a fresh fit",
          "[cli][model][calibration]") {
  std::string src = KVTIER_SOURCE_DIR;
  auto r = kvtier("model-fit --data " + src + "/measurements/step_times.json --check " + src +
                  "/docs/models.md");
  INFO(r.out);
  CHECK(r.code == 0);
}

TEST_CASE("cli: model-fit names what is wrong in a measurement file",
          "[cli][model][calibration][bad_input]") {
  fs::path dir = scratch("model-fit");
  fs::create_directories(dir);
  json j = json::parse(slurp(fs::path(KVTIER_SOURCE_DIR) / "measurements/step_times.json"));
  j["points"][3].erase("measured");
  std::ofstream(dir / "bad.json") << j.dump();
  auto r = kvtier("model-fit --data " + (dir / "bad.json").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("points[3]") != std::string::npos);
  CHECK(r.out.find("'measured'") != std::string::npos);
  j = json::parse(slurp(fs::path(KVTIER_SOURCE_DIR) / "measurements/step_times.json"));
  j["points"][0]["model"] = "llama-9";
  std::ofstream(dir / "bad.json") << j.dump();
  r = kvtier("model-fit --data " + (dir / "bad.json").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("preset.model") != std::string::npos);
  j = json::parse(slurp(fs::path(KVTIER_SOURCE_DIR) / "measurements/step_times.json"));
  j["sources"]["lmdeploy-a100"]["first_token"] = "sample";
  std::ofstream(dir / "bad.json") << j.dump();
  r = kvtier("model-fit --data " + (dir / "bad.json").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("'first_token': expected prefill or decode, got sample") != std::string::npos);
  fs::remove_all(dir);
}
