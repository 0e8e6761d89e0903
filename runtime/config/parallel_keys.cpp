#include "runtime/config/parallel_keys.hpp"

namespace kvtier {

std::vector<option_spec> parallel_key_specs() {
  return {
    {keys::parallel::tp, 1, 1024, {}, false,
     "tensor-parallel ranks of an instance: split KV heads and compute, all-reduce per layer"},
    {keys::parallel::pp, 1, 1024, {}, false,
     "pipeline-parallel stages of an instance: split the layers (and their KV)"},
    {keys::parallel::pp_microbatches, 1, 1024, {}, false,
     "micro-batches a step is cut into so that pipeline stages overlap under compute.model="
     "roofline; 1: the stages run one after another"},
  };
}

}  // namespace kvtier
