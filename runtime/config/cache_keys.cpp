#include "runtime/config/cache_keys.hpp"

namespace kvtier {

std::vector<option_spec> cache_key_specs() {
  return {
    {keys::cache::block_size, 1, 32768, {}, false,
     "tokens per cache block; trace blocks map onto whole cache blocks"},
    {keys::cache::device_tokens, 0, 1e15, {}, true,
     "device (GPU) tier capacity in tokens (rounded down to blocks); or set cache.device_blocks"},
    {keys::cache::device_blocks, 0, max_block_count, {}, true,
     "device (GPU) tier capacity in blocks; or set cache.device_tokens"},
    {keys::cache::host_tokens, 0, 1e15, {}, true,
     "host (pinned DRAM) tier capacity in tokens, 0 = no host tier; or set cache.host_blocks"},
    {keys::cache::host_blocks, 0, max_block_count, {}, true,
     "host tier capacity in blocks, 0 = no host tier; or set cache.host_tokens"},
    {keys::cache::eviction, 0, 0, {"lru", "lfu"}, false,
     "eviction order of each tier's unreferenced leaf blocks"},
    {keys::cache::write_policy, 0, 0,
     {"write_through", "write_through_selective", "write_back"}, false,
     "when device blocks get a host copy"},
    {keys::cache::write_through_threshold, 1, 1e9, {}, false,
     "hits a block needs before write_through_selective backs it up (write_through uses 1)"},
    {keys::cache::storage_write, 0, 0,
     {"always", "write_through_selective", "on_host_evict", "never"}, false,
     "when host copies are written to storage: always (once the host copy is ready), "
     "write_through_selective (once the block has cache.storage_write_threshold hits), "
     "on_host_evict, never"},
    {keys::cache::storage_write_threshold, 1, 1e9, {}, false,
     "cache.storage_write=write_through_selective: hits a block needs before it is written to "
     "storage (1 for the request that computed it, +1 per prefix match)"},
    {keys::cache::output_caching, 0, 0, {}, false,
     "decode and mixed instances write each finished request's prompt and output blocks to "
     "storage before freeing them, so other instances hit on them (FastDeploy "
     "--enable-output-caching); output blocks go under keys of their own, as traces name no "
     "generated tokens"},
    {keys::cache::write_back_host_copy, 0, 0, {"free_on_swap_in", "keep"}, false,
     "write_back: a swapped-in block's host copy is freed (FastDeploy; the block is written back "
     "again at its next eviction) or kept (SGLang HiCache; each block is written back once)"},
    {keys::cache::prefix_caching, 0, 0, {}, false,
     "false: no prefix matching in any tier and no copies below the device, every prompt token "
     "is computed (an engine without prefix caching: the no-caching baseline)"},
  };
}

}  // namespace kvtier
