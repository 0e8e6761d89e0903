// The pure parts of the PD handoff: FastDeploy's preallocation rules on a decode instance, the
// PD link's timing, which blocks a prefill chunk completes, the storage keys of handed-off
// blocks, and the seeded failure draw.

#include <catch2/catch.hpp>

#include "model/pd/handoff_fault.hpp"
#include "model/pd/handoff_keys.hpp"
#include "model/pd/pd_link.hpp"
#include "model/pd/pd_options.hpp"
#include "model/pd/preallocation.hpp"
#include "model/pd/prefill_streams.hpp"
#include "model/storage/storage_index.hpp"

using namespace kvtier;

namespace {

decode_load idle_decoder() {
  decode_load d;
  d.waiting = 0;
  d.holding = 0;
  d.max_num_seqs = 4;
  d.available_blocks = 100;
  d.reserve_per_running = 10;
  return d;
}

}  // namespace

TEST_CASE("preallocation: an idle decoder with room grants", "[pd][preallocation]") {
  CHECK(decide_preallocation(idle_decoder(), 100) == preallocation_verdict::granted);
  CHECK(decide_preallocation(idle_decoder(), 101) == preallocation_verdict::no_blocks);
}

TEST_CASE("preallocation: a waiting queue refuses, whatever the room", "[pd][preallocation]") {
  decode_load d = idle_decoder();
  d.waiting = 1;
  CHECK(decide_preallocation(d, 1) == preallocation_verdict::waiting_queue);
}

TEST_CASE("preallocation: every batch slot taken refuses", "[pd][preallocation]") {
  decode_load d = idle_decoder();
  d.reserve_per_running = 0;
  d.holding = 3;
  CHECK(decide_preallocation(d, 1) == preallocation_verdict::granted);
  d.holding = 4;
  CHECK(decide_preallocation(d, 1) == preallocation_verdict::no_slot);
}

TEST_CASE("preallocation: the output reserve of every request holding a slot stays free",
          "[pd][preallocation]") {
  decode_load d = idle_decoder();
  d.holding = 3;  // 3 x 10 reserved: 70 left for the newcomer
  CHECK(decide_preallocation(d, 70) == preallocation_verdict::granted);
  CHECK(decide_preallocation(d, 71) == preallocation_verdict::no_blocks);
  d.reserve_per_running = 0;  // the reserve decayed away
  CHECK(decide_preallocation(d, 100) == preallocation_verdict::granted);
}

TEST_CASE("pd link: first come first served, latency after the wire", "[pd][link]") {
  pd_link l(2.0, 100);  // 2 bytes per ns
  CHECK(l.send(0, 1000) == 600);       // 0 .. 500 on the wire, +100
  CHECK(l.send(200, 1000) == 1100);    // waits for the link: 500 .. 1000
  CHECK(l.send(5000, 1) == 5101);      // idle link: starts when ready; 0.5 ns rounds up
  CHECK(l.bytes() == 2001);
  CHECK(l.busy_ns() == 1001);
  CHECK(l.messages() == 3);
}

TEST_CASE("pd streams: each layer leaves when computed, and D's prefix is never sent",
          "[pd][link]") {
  pd_options o;
  o.link_gbps = 1;
  o.link_latency_ns = 100;
  std::vector<cache_block> blocks{{11, 16}, {12, 16}, {13, 16}, {14, 8}};
  prefill_streams s(o, 16, 4, 1024);  // 256 bytes per block per layer
  prefill_stream x;
  x.layout = request_layout(blocks, 16);
  x.prompt = 56;
  x.blocks = 4;
  x.skip = 1;
  s.add(9, x);
  // A first chunk of 40 tokens completes blocks 0 and 1; block 0 is D's: one block (256 bytes)
  // per layer. Layer 0 leaves at 100; each later one waits for the link: 100 + 4 x 256, +100.
  s.computed(9, 40, {100, 200, 300, 400});
  CHECK(s.find(9)->kv_arrival_ns == 100 + 4 * 256 + 100);
  CHECK(s.blocks_sent() == 1);
  CHECK(s.blocks_skipped() == 1);
  // The last chunk completes blocks 2 and the partial 3: 512 bytes per layer, its first layer
  // queued behind the first chunk's last (the link is free at 1124).
  s.computed(9, 56, {1000, 1100, 1200, 1300});
  CHECK(s.find(9)->kv_arrival_ns == 1124 + 4 * 512 + 100);
  CHECK(s.blocks_sent() == 3);
  // Computing again after a preemption sends nothing twice.
  s.computed(9, 56, {5000, 5000, 5000, 5000});
  CHECK(s.blocks_sent() == 3);
  CHECK(s.link().bytes() == 4 * 256 + 4 * 512);
}

TEST_CASE("pd streams: blocks complete within a chunk, unlisted prompt blocks included",
          "[pd][link]") {
  std::vector<cache_block> blocks{{1, 16}, {2, 16}};
  request_layout l(blocks, 16);
  CHECK(complete_prompt_blocks(l, 16, 70, 15) == 0);
  CHECK(complete_prompt_blocks(l, 16, 70, 16) == 1);
  CHECK(complete_prompt_blocks(l, 16, 70, 47) == 2);
  CHECK(complete_prompt_blocks(l, 16, 70, 48) == 3);
  CHECK(complete_prompt_blocks(l, 16, 70, 70) == 5);  // the prompt's partial tail counts at its end
}

TEST_CASE("handoff keys: full blocks under their shared key, partial ones under their own",
          "[pd][keys]") {
  std::vector<cache_block> blocks{{101, 16}, {102, 16}, {103, 5}};
  trace_request req;
  req.seq = 4;
  std::vector<uint64_t> k = handoff_keys(blocks, 16, 37, 7, req);
  REQUIRE(k.size() == 3);
  CHECK(k[0] == make_storage_key(7, 101));
  CHECK(k[1] == make_storage_key(7, 102));
  CHECK(k[2] == partial_block_key(7, 102, 37, 103));  // a listed partial block: its own hash
  CHECK(k[2] != make_storage_key(7, 103));  // never matched as the shared block 103
  // Prompt tokens past the listed blocks (and, for output caching, generated ones) follow.
  std::vector<uint64_t> longer = handoff_keys(blocks, 16, 70, 7, req);
  REQUIRE(longer.size() == request_layout(blocks, 16).blocks_for(70));
  REQUIRE(longer.size() == 6);
  CHECK(longer[3] == partial_block_key(7, 102, 53, partial_content(req, 37, 53)));
  CHECK(longer[4] == partial_block_key(7, 102, 69, partial_content(req, 53, 69)));
  CHECK(longer[5] == partial_block_key(7, 102, 70, partial_content(req, 69, 70)));
  // Other prompts, other namespaces, other lengths, other content: other keys.
  CHECK(partial_block_key(7, 102, 37, 1) != partial_block_key(7, 102, 38, 1));
  CHECK(partial_block_key(7, 102, 37, 1) != partial_block_key(8, 102, 37, 1));
  CHECK(partial_block_key(7, 102, 37, 1) != partial_block_key(7, 101, 37, 1));
  CHECK(partial_block_key(7, 102, 37, 1) != partial_block_key(7, 102, 37, 2));
}

TEST_CASE("handoff keys: a partial block's key holds its tokens", "[pd][keys]") {
  // Two 74-token prompts share their first 64 tokens and differ in the last 10 (FastDeploy PR
  // #7839 hashes the partial block's tokens into its key).
  trace_request a, b;
  a.seq = 1;
  b.seq = 2;
  for (int32_t t = 0; t < 74; ++t) {
    a.tokens.push_back(t);
    b.tokens.push_back(t < 64 ? t : 1000 + t);
  }
  std::vector<cache_block> blocks_a, blocks_b;
  map_token_blocks(a.tokens.data(), a.tokens.size(), 64, blocks_a);
  map_token_blocks(b.tokens.data(), b.tokens.size(), 64, blocks_b);
  std::vector<uint64_t> ka = handoff_keys(blocks_a, 64, 74, 7, a);
  std::vector<uint64_t> kb = handoff_keys(blocks_b, 64, 74, 7, b);
  REQUIRE(ka.size() == 2);
  REQUIRE(kb.size() == 2);
  CHECK(ka[0] == kb[0]);  // the shared full block
  CHECK(ka[1] != kb[1]);  // the tails differ
  // The same tail in another request is the same content: one key.
  trace_request same = a;
  same.seq = 3;
  CHECK(handoff_keys(blocks_a, 64, 74, 7, same) == ka);
  // Tokens the trace does not give (ids traces past their ids, generated tokens) are the
  // request's own.
  trace_request no_tokens_a, no_tokens_b;
  no_tokens_a.seq = 1;
  no_tokens_b.seq = 2;
  CHECK(handoff_keys(blocks_a, 64, 74, 7, no_tokens_a)[1]
        != handoff_keys(blocks_a, 64, 74, 7, no_tokens_b)[1]);
  CHECK(handoff_keys(blocks_a, 64, 74, 7, no_tokens_a)
        == handoff_keys(blocks_a, 64, 74, 7, no_tokens_a));
}

TEST_CASE("handoff failures: the error code FastDeploy answers them with", "[pd][faults]") {
  CHECK(handoff_error_code(pd_transfer::storage) == 502);  // D's storage read failed (PR #7839)
  CHECK(handoff_error_code(pd_transfer::direct) == 500);   // the splitwise send failed
  CHECK(decode_resource_timeout_code == 500);
}

TEST_CASE("handoff failures: drawn from the seed per request, at the configured rate",
          "[pd][faults]") {
  CHECK_FALSE(handoff_fails(1, 5, 0.0));
  CHECK(handoff_fails(1, 5, 1.0));
  uint64_t failed = 0, differ = 0;
  for (uint64_t req = 0; req < 10000; ++req) {
    failed += handoff_fails(42, req, 0.25);
    differ += handoff_fails(42, req, 0.25) != handoff_fails(43, req, 0.25);
    CHECK(handoff_fails(42, req, 0.25) == handoff_fails(42, req, 0.25));
  }
  CHECK(failed > 2300);
  CHECK(failed < 2700);
  CHECK(differ > 1000);  // another seed, other requests fail
}
