// cache.output_caching (FastDeploy --enable-output-caching): a finished request's prompt and
// output blocks are written device -> host -> storage before they are freed, so that prefill
// instances find them in the pool later.

#include "model/pd/handoff_keys.hpp"
#include "model/scheduler/scheduler_state.hpp"

namespace kvtier {

void scheduler_state::expect_output(const live_request& x, const request_arrival& a) {
  if (!options.output_caching)
    return;
  // Its KV at the end covers the prompt and every generated token but the last.
  output_keys[x.trace.seq] = handoff_keys(a.blocks, options.options.block_size,
                                          x.prompt + uint64_t{x.output} - 1,
                                          options.pd.storage_namespace, a.req);
}

void scheduler_state::finish(request_id id, scheduler_orders& out) {
  auto it = output_keys.find(id);
  if (it == output_keys.end()) {
    finished.push_back(id);  // released by the next commit
  } else {
    std::vector<uint64_t> keys = std::move(it->second);
    output_keys.erase(it);
    ++report.output_cache_writes;
    report.output_cache_blocks += keys.size();
    ++writing_outputs;
    write_to_storage(keys, transfer_use::output_store, id, out);
  }
  answer(id, done_now(id), out);
}

void scheduler_state::output_written(request_id id, scheduler_orders& out) {
  --writing_outputs;
  finished.push_back(id);
  request_plan(out);
}

}  // namespace kvtier
