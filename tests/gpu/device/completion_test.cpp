// Completion: per-layer events of H2D, the callback's order, and both directions at once.

#include <algorithm>
#include <chrono>
#include <mutex>

#include <catch2/catch.hpp>

#include "support.hpp"

using namespace kvtier::gpu;
using namespace kvtier::gpu::test;

namespace {

struct call_log {
  std::mutex m;
  std::vector<std::pair<op_id, int>> calls;

  std::vector<int> layers_of(op_id id) {
    std::lock_guard<std::mutex> lock(m);
    std::vector<int> out;
    for (const auto& c : calls)
      if (c.first == id)
        out.push_back(c.second);
    return out;
  }
};

}  // namespace

TEST_CASE("h2d: layers complete in order, each with its event and callback", "[gpu][layers]") {
  call_log log;
  kv_cache_config cfg = make_config(llama_shape(16), 160, 160);
  cfg.on_complete = [&log](op_id id, int layer) {
    std::lock_guard<std::mutex> lock(log.m);
    log.calls.emplace_back(id, layer);
  };
  auto cache = make_kv_cache(cfg);
  kv_cache& c = *cache;
  const int layers = static_cast<int>(c.layout().shape.layers);
  auto pairs = scattered_pairs(7, 128, c.layout(), true);  // 256 MiB: ~5 ms on PCIe Gen5
  for (transfer_method m : {transfer_method::per_chunk, transfer_method::batched,
                            transfer_method::staging, transfer_method::zero_copy}) {
    INFO(to_string(m));
    auto submitting = std::chrono::steady_clock::now();
    op_id id = c.submit_h2d(pairs, m);
    double submit_ns = std::chrono::duration<double, std::nano>(
                         std::chrono::steady_clock::now() - submitting).count();
    int polls = 0;
    bool prefix = true;
    while (!c.layer_done(id)) {
      // Layer events are recorded in order on one stream: what is done is always a prefix.
      bool gap = false;
      for (int l = 0; l < layers; ++l) {
        bool done = c.layer_done(id, l);
        prefix = prefix && !(done && gap);
        gap = gap || !done;
      }
      ++polls;
    }
    CHECK(prefix);
    for (int l = 0; l < layers; ++l)
      CHECK(c.layer_done(id, l));
    transfer_timing t = c.transfer_time(id);
    // The copy must be seen in flight when it outlasted its submission by far. A host slow to
    // submit (about 50 us per block on some hosts: docs/gpu.md, "The stall") can end the copy
    // before the submission returns; the layer times below still show it landed layer by layer.
    if (submit_ns < 0.5 * t.total_ns)
      CHECK(polls > 0);
    else
      WARN("submission took " << submit_ns / 1e6 << " ms of the copy's " << t.total_ns / 1e6
                              << " ms: its layers were not necessarily seen in flight");
    REQUIRE(t.layer_done_ns.size() == static_cast<size_t>(layers));
    CHECK(std::is_sorted(t.layer_done_ns.begin(), t.layer_done_ns.end()));
    CHECK(t.layer_done_ns.front() > 0);
    CHECK(t.layer_done_ns.back() <= t.total_ns);
    // The first layer lands well before the whole transfer: layer by layer, not all at once.
    CHECK(t.layer_done_ns.front() < 0.25 * t.total_ns);
    c.release(id);
    std::vector<int> expected;
    for (int l = 0; l < layers; ++l)
      expected.push_back(l);
    expected.push_back(-1);
    CHECK(log.layers_of(id) == expected);
  }
  op_id d2h = c.submit_d2h(pairs);
  CHECK_THROWS_WITH(c.layer_done(d2h, 0), Catch::Contains("all layers at once"));
  c.release(d2h);
  CHECK(log.layers_of(d2h) == std::vector<int>{-1});
  CHECK_THROWS_WITH(c.wait(d2h), Catch::Contains("unknown op"));
}

TEST_CASE("h2d and d2h run at the same time", "[gpu][duplex]") {
  kv_cache_config cfg = make_config(llama_shape(64), 120, 100);
  auto cache = make_kv_cache(cfg);
  kv_cache& c = *cache;
  // 48 blocks of 8 MiB each way, on disjoint device and host blocks.
  std::vector<block_pair> in, out;
  for (uint32_t k = 0; k < 48; ++k) {
    in.push_back(block_pair{2 * k, k});
    out.push_back(block_pair{2 * k + 1, 50 + k});
  }
  fill_every_host_block(c);
  fill_every_device_block(c);
  auto alone = [&](bool h2d) {
    op_id id = h2d ? c.submit_h2d(in) : c.submit_d2h(out);
    c.wait(id);
    double ns = c.transfer_time(id).total_ns;
    c.release(id);
    return ns;
  };
  double h2d_ns = alone(true);
  double d2h_ns = alone(false);
  fill_every_host_block(c);
  fill_every_device_block(c);
  c.synchronize();
  op_id a = c.submit_d2h(out);
  op_id b = c.submit_h2d(in);
  c.wait(a);
  c.wait(b);
  double offset = c.start_offset_ns(a, b);
  double span = std::max(c.transfer_time(a).total_ns, offset + c.transfer_time(b).total_ns)
                - std::min(0.0, offset);
  c.release(a);
  c.release(b);
  INFO("h2d alone " << h2d_ns / 1e6 << " ms, d2h alone " << d2h_ns / 1e6 << " ms, together "
                    << span / 1e6 << " ms");
  CHECK(span < 0.8 * (h2d_ns + d2h_ns));
  CHECK(check_devices_after_h2d(c, in) == "");
  CHECK(check_hosts_after_d2h(c, out) == "");
}
