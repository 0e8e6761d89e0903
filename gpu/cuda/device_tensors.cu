#include "gpu/cuda/device_tensors.cuh"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "gpu/cuda/cuda_resources.cuh"

namespace kvtier::gpu::detail {

namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

/// Every tensor in one allocation (kv_layout.hpp's arena).
class arena_tensors final : public device_tensors {
 public:
  explicit arena_tensors(const kv_layout& layout) : device_tensors(layout) {
    try {
      arena_ = std::make_unique<device_buffer>(layout.device_bytes());
    } catch (const gpu_error& e) {
      throw gpu_error("allocating " + gib(layout.device_bytes()) + " of device KV tensors: "
                      + e.what() + "; to fit, lower cache.device_tokens (or use a GPU profile: "
                      "--config configs/h100-80gb.json, configs/h200.json)");
    }
    for (uint32_t l = 0; l < layout.shape.layers; ++l)
      layers_.push_back(arena_->get() + layout.tensor_offset(l, kv_half::key));
    bytes_ = layout.device_bytes();
  }
  uint64_t contiguous_bytes() const override { return bytes_; }

 private:
  std::unique_ptr<device_buffer> arena_;
  uint64_t bytes_ = 0;
};

/// One cudaMalloc per layer (K then V, or the latent), as an engine allocates its per-layer KV
/// tensors: each is exported on its own.
class exported_tensors final : public device_tensors {
 public:
  explicit exported_tensors(const kv_layout& layout) : device_tensors(layout) {
    uint64_t bytes = layout.halves() * tensor_bytes_;
    for (uint32_t l = 0; l < layout.shape.layers; ++l) {
      try {
        owned_.push_back(std::make_unique<device_buffer>(bytes));
      } catch (const gpu_error& e) {
        throw gpu_error("allocating layer " + std::to_string(l) + "'s KV tensors ("
                        + gib(bytes) + "): " + e.what() + "; to fit, lower cache.device_tokens");
      }
      layers_.push_back(owned_.back()->get());
    }
  }
  uint64_t contiguous_bytes() const override { return layout_.halves() * tensor_bytes_; }
  std::vector<layer_tensor_handle> export_layers() const override {
    std::vector<layer_tensor_handle> out(layers_.size());
    for (size_t l = 0; l < layers_.size(); ++l) {
      cudaIpcMemHandle_t h;
      KVTIER_CUDA_CHECK(cudaIpcGetMemHandle(&h, layers_[l]));
      static_assert(sizeof h == ipc_handle_bytes, "CUDA's IPC handle size changed");
      std::memcpy(out[l].handle.data(), &h, sizeof h);
      out[l].offset = 0;
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<device_buffer>> owned_;
};

/// Another process's layers. Each distinct handle is opened once (layers may share an
/// allocation) and closed when the cache goes.
class attached_tensors final : public device_tensors {
 public:
  attached_tensors(const kv_layout& layout, const std::vector<layer_tensor_handle>& handles)
      : device_tensors(layout) {
    std::map<ipc_handle, uint8_t*> opened;
    for (size_t l = 0; l < handles.size(); ++l) {
      const layer_tensor_handle& h = handles[l];
      auto it = opened.find(h.handle);
      if (it == opened.end()) {
        cudaIpcMemHandle_t mh;
        std::memcpy(&mh, h.handle.data(), sizeof mh);
        void* p = nullptr;
        cudaError_t err = cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess);
        if (err != cudaSuccess) {
          cudaGetLastError();  // not sticky: clear it
          close_all();
          throw gpu_error("cannot open layer " + std::to_string(l) + "'s tensor handle "
                          "(cudaIpcOpenMemHandle): " + cudaGetErrorString(err)
                          + "; the engine must run on this machine's GPU, in another process");
        }
        it = opened.emplace(h.handle, static_cast<uint8_t*>(p)).first;
        bases_.push_back(p);
      }
      layers_.push_back(it->second + h.offset);
    }
  }
  ~attached_tensors() override { close_all(); }
  uint64_t contiguous_bytes() const override {
    return layout_.default_strides() ? layout_.halves() * tensor_bytes_ : layout_.chunk_bytes();
  }

 private:
  void close_all() {
    for (void* p : bases_)
      cudaIpcCloseMemHandle(p);
    bases_.clear();
  }
  std::vector<void*> bases_;
};

}  // namespace

uint8_t* device_tensors::at(uint64_t arena_offset) const {
  uint64_t tensor = arena_offset / tensor_bytes_;
  uint32_t halves = layout_.halves();
  return layers_[tensor / halves] + (tensor % halves) * tensor_bytes_
         + arena_offset % tensor_bytes_;
}

std::vector<layer_tensor_handle> device_tensors::export_layers() const {
  throw gpu_error("only a cache made with device_memory::own_exported exports its tensors");
}

std::unique_ptr<device_tensors> device_tensors::make(const kv_cache_config& config,
                                                     const kv_layout& layout) {
  switch (config.memory) {
    case device_memory::own_exported: return std::make_unique<exported_tensors>(layout);
    case device_memory::attached: return std::make_unique<attached_tensors>(layout, config.attach);
    case device_memory::attached_shm:
      throw gpu_error("shared-memory tensors are the CPU backend's (gpu/shm/), not CUDA's");
    case device_memory::own_arena: break;
  }
  return std::make_unique<arena_tensors>(layout);
}

}  // namespace kvtier::gpu::detail
