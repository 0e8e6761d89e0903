#pragma once

// Prefill/decode disaggregation: what an instance does in a PD deployment, and how the KV cache of
// a prefilled request reaches its decode instance (docs/cluster.md).
//
//   direct   D preallocates the request's blocks before P prefills it; P streams each layer's
//            KV over its PD link (RDMA) as the layer completes; D decodes once the last layer
//            and the first token are there (FastDeploy's splitwise flow, docs/fastdeploy.md §6).
//   storage  P writes every block of the request to the storage pool when prefill ends, the
//            partial last block under a key of its own, then emits the first token; D reads the
//            blocks it lacks into its preallocated blocks through host memory (PR #7839).

#include <cstdint>

namespace kvtier {

enum class pd_role : uint8_t { mixed = 0, prefill = 1, decode = 2 };
enum class pd_transfer : uint8_t { direct = 0, storage = 1 };
/// What D does when the KV never arrives whole: fail the request (FastDeploy's error) or
/// compute the prompt itself.
enum class handoff_failure_rule : uint8_t { error = 0, recompute = 1 };
/// Storage handoff: which of a request's blocks P writes itself. `every_block`; or
/// `unshared_blocks` where P's write policy stores every full block it commits under its shared
/// key anyway (write_through with cache.storage_write=always): P then writes the partial and
/// unnamed blocks only and waits for the rest to be visible, so no block crosses P's PCIe link
/// or NIC twice (docs/cluster.md).
enum class handoff_writes : uint8_t { every_block = 0, unshared_blocks = 1 };

const char* to_string(pd_role r);
const char* to_string(pd_transfer t);
const char* to_string(handoff_failure_rule r);

/// The error code of a request whose handoff failed (pd.on_handoff_failure = error): 502 when
/// D's read from the storage pool failed, as FastDeploy PR #7839 answers it; 500, FastDeploy's
/// splitwise failure code, when the direct send failed (docs/fastdeploy.md §6).
uint16_t handoff_error_code(pd_transfer t);
/// A prefill that waited pd.wait_decode_resource_s for its decode instance fails with 500.
constexpr uint16_t decode_resource_timeout_code = 500;

struct pd_options {
  pd_transfer transfer = pd_transfer::direct;
  double link_gbps = 25;               ///< links.pd_gbps: P's KV send link
  int64_t link_latency_ns = 10'000;    ///< links.pd_latency_us
  /// FD_PREFILL_WAIT_DECODE_RESOURCE_SECONDS: how long P waits for D's allocation.
  int64_t wait_decode_resource_ns = 30'000'000'000;
  /// PREFILL_CONTINUOUS_REQUEST_DECODE_RESOURCES: ask again every retry interval instead of
  /// failing when the wait runs out.
  bool retry_decode_resource = false;
  int64_t retry_interval_ns = 50'000'000;
  handoff_failure_rule on_failure = handoff_failure_rule::error;
  double failure_rate = 0;             ///< pd.failure_rate: handoffs failed on purpose
  uint64_t seed = 0;                   ///< draws of failure_rate
  uint64_t storage_namespace = 0;      ///< keys of handed-off blocks in the storage pool
  handoff_writes writes = handoff_writes::every_block;
  /// pd.decode_extra_blocks: FastDeploy's enc_dec_block_num (docs/fastdeploy.md §5).
  uint32_t decode_extra_blocks = 2;
};

}  // namespace kvtier
