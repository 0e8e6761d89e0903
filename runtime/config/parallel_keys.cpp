#include "runtime/config/parallel_keys.hpp"

namespace kvtier {

std::vector<option_spec> parallel_key_specs() {
  return {
    {keys::parallel::tp, 1, 1024, {}, false,
     "tensor-parallel ranks of an instance: split KV heads and compute, all-reduce per layer"},
    {keys::parallel::pp, 1, 1024, {}, false,
     "pipeline-parallel stages of an instance: split the layers (and their KV)"},
  };
}

}  // namespace kvtier
