#include "runtime/config/preset_keys.hpp"

#include "runtime/config/presets.hpp"

namespace kvtier {

std::vector<option_spec> preset_key_specs() {
  return {
    {keys::preset::model, 0, 0, model_preset_names(), true,
     "a model's figures (docs/models.md): sets model.* and compute.model=roofline"},
    {keys::preset::gpu, 0, 0, gpu_preset_names(), true,
     "a GPU's figures (docs/models.md): sets gpu.* and compute.model=roofline"},
  };
}

}  // namespace kvtier
