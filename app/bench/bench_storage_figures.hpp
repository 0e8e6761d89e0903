#pragma once
// What `kvtier bench storage` measures of one side, a backend's batch path or its baseline
// (bench_storage_command.cpp describes the bench and how each figure is timed).

#include <algorithm>

namespace kvtier {

struct storage_figures {
  double put_gbps = 0, get_gbps = 0;
  double put_batch_ms = 0, get_batch_ms = 0;  // median
  // Lone requests (a batch of 1, one at a time, each after the idle gap), medians: a 4 KiB block
  // and a whole one, each way.
  double put_small_us = 0, get_small_us = 0;
  double put_one_ms = 0, get_one_ms = 0;
  // The line through the two sizes: a request's fixed cost (intercept) and one block's stream
  // rate (slope), as the model charges a lone block.
  double op_latency_us = 0, read_op_latency_us = 0;
  double stream_put_gbps = 0, stream_get_gbps = 0;
  // A node's bandwidth as the model charges a batch: its bytes over the batch's time less the op
  // latency the model charges beside them (every batch is a request that pays it).
  double node_put_gbps = 0, node_get_gbps = 0;
};

// The better throughput of two runs, the rest from the first. The machine is shared and a disk's
// write-back comes and goes: the baseline runs before and after the backend's first run, the
// backend again after that, and each side is judged by its better run, so that the target is
// met by neither a slow baseline nor a slow backend run that the other side did not meet.
inline storage_figures best_of(const storage_figures& a, const storage_figures& b) {
  storage_figures f = a;
  f.put_gbps = std::max(a.put_gbps, b.put_gbps);
  f.get_gbps = std::max(a.get_gbps, b.get_gbps);
  return f;
}

}  // namespace kvtier
