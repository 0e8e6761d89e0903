// The backend's entry points when kvtier is built without CUDA (KVTIER_HAVE_CUDA off): the same
// header links, device queries say why there is no device, and creating a cache fails with that
// reason instead of at link time.

#include "gpu/kv_cache.hpp"

namespace kvtier::gpu {

bool cuda_built() noexcept {
  return false;
}

device_info query_device(int ordinal) noexcept {
  device_info info;
  info.ordinal = ordinal;
  info.reason = "built without CUDA";
  return info;
}

std::unique_ptr<kv_cache> make_cuda_kv_cache(const kv_cache_config& config) {
  const std::string what = "cannot create the GPU KV cache: ";
  if (auto err = check_config(config))
    throw gpu_error(what + *err);
  throw gpu_error(what + describe(query_device(config.device_ordinal)));
}

}  // namespace kvtier::gpu
