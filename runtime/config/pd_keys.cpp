#include "runtime/config/pd_keys.hpp"

namespace kvtier {

std::vector<option_spec> pd_key_specs() {
  return {
    {keys::pd::transfer, 0, 0, {"direct", "storage"}, false,
     "how a prefill instance hands a request's KV cache to its decode instance: streamed layer by "
     "layer over the PD link (direct), or written to the storage pool and read back (storage)"},
    {keys::pd::wait_decode_resource_s, 0, 1e6, {}, false,
     "how long a prefill waits for a decode instance to preallocate the request's blocks before "
     "the request fails (FD_PREFILL_WAIT_DECODE_RESOURCE_SECONDS)"},
    {keys::pd::retry_decode_resource, 0, 0, {}, false,
     "ask decode instances again every pd.retry_interval_ms instead of failing after "
     "pd.wait_decode_resource_s (PREFILL_CONTINUOUS_REQUEST_DECODE_RESOURCES)"},
    {keys::pd::retry_interval_ms, 0.001, 1e6, {}, false,
     "pd.retry_decode_resource: milliseconds between two preallocation requests"},
    {keys::pd::on_handoff_failure, 0, 0, {"error", "recompute"}, false,
     "a handoff whose KV never arrives whole: the request fails (FastDeploy's error 500), or the "
     "decode instance computes the prompt itself"},
    {keys::pd::failure_rate, 0, 1, {}, false,
     "probability that a handoff fails (seeded fault injection, drawn from --seed per request)"},
    {keys::pd::decode_extra_blocks, 0, 1e6, {}, false,
     "blocks a decode instance preallocates beyond the prompt's, for the tokens it generates "
     "(FastDeploy's enc_dec_block_num, FD_ENC_DEC_BLOCK_NUM)"},
  };
}

}  // namespace kvtier
