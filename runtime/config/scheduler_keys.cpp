#include "runtime/config/scheduler_keys.hpp"

namespace kvtier {

std::vector<option_spec> scheduler_key_specs() {
  return {
    {keys::scheduler::max_num_seqs, 1, 1e6, {}, false,
     "requests running at once, at most"},
    {keys::scheduler::token_budget, 1, 1e9, {}, false,
     "tokens per step (prefill chunks and decode tokens together): chunked prefill"},
    {keys::scheduler::reserve_output_blocks, 0, 1e6, {}, false,
     "blocks kept free per running request when admitting (FastDeploy, decays each step)"},
    {keys::scheduler::reserve_decay, 0, 1e6, {}, false,
     "decay of that reserve per non-empty step"},
    {keys::scheduler::reserve_min, 0, 1e6, {}, false, "floor of that reserve"},
    {keys::scheduler::probe_limit, 1, 1e6, {}, false,
     "waiting requests matched against the cache per step, at most"},
    {keys::scheduler::preemption, 0, 0,
     {"recompute", "save_to_storage", "swap_to_host"}, false,
     "what a preempted request's computed blocks become: released and recomputed where the cache "
     "lost them (recompute); copied to host and written to storage before they are freed, found "
     "there at re-admission (save_to_storage, needs a storage tier); copied to host and swapped "
     "back in at re-admission (swap_to_host, needs a host tier). docs/preemption.md"},
  };
}

}  // namespace kvtier
