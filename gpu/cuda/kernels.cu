#include "gpu/cuda/kernels.cuh"

#include <algorithm>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/verify_pattern.hpp"

namespace kvtier::gpu::detail {

namespace {

constexpr uint32_t copy_threads = 256;
constexpr uint32_t zero_copy_threads = 512;
constexpr uint32_t pattern_threads = 256;
constexpr uint32_t ctas_max = 1024;
/// The staging kernels' unit of work: 16 KiB, one pass of a CTA. A slot of a few large chunks
/// still spreads over many CTAs, which keeps small transfers short.
constexpr uint32_t piece_words = copy_threads * 4;

__device__ __forceinline__ uint8_t* chunk_at(const tensor_view& t, uint32_t block,
                                             uint32_t layer, uint32_t half) {
  return t.layer_base[layer] + half * t.half_stride + uint64_t{block} * t.block_stride;
}

/// The CTA copies `words` 16-byte words; each thread keeps `unroll` loads in flight before its
/// first store. Device memory needs few; reads across PCIe (zero-copy H2D) need many to cover
/// their microseconds of latency with a handful of CTAs.
template <uint32_t unroll>
__device__ __forceinline__ void copy_chunk(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                           uint32_t words) {
  for (uint32_t base = threadIdx.x; base < words; base += unroll * blockDim.x) {
    uint4 v[unroll];
#pragma unroll
    for (uint32_t k = 0; k < unroll; ++k) {
      uint32_t i = base + k * blockDim.x;
      if (i < words)
        v[k] = src[i];
    }
#pragma unroll
    for (uint32_t k = 0; k < unroll; ++k) {
      uint32_t i = base + k * blockDim.x;
      if (i < words)
        dst[i] = v[k];
    }
  }
}

/// Chunk item i of the window is half i % halves of slice i / halves; in the slot the K of a
/// slice is followed by its V, as on the host. Each chunk is cut into pieces of piece_words.
template <bool to_slot>
__global__ void slot_kernel(const __grid_constant__ slot_args a) {
  uint32_t words = static_cast<uint32_t>(a.tensors.chunk_bytes / 16);
  uint32_t pieces = (words + piece_words - 1) / piece_words;
  uint32_t halves = a.tensors.halves;
  uint32_t units = halves * a.window.slice_count * pieces;
  for (uint32_t u = blockIdx.x; u < units; u += gridDim.x) {
    uint32_t item = u / pieces;
    uint32_t first = u % pieces * piece_words;
    uint32_t count = min(piece_words, words - first);
    slice_ref r = slice_at(a.window, item / halves);
    auto* tensor = reinterpret_cast<uint4*>(chunk_at(a.tensors, a.device_ids[r.pair], r.layer,
                                                     item % halves)) + first;
    auto* slot = reinterpret_cast<uint4*>(a.slot + uint64_t{item} * a.tensors.chunk_bytes) + first;
    if (to_slot)
      copy_chunk<4>(slot, tensor, count);
    else
      copy_chunk<4>(tensor, slot, count);
  }
}

template <bool to_device>
__global__ void zero_copy_kernel(const __grid_constant__ zero_copy_args a) {
  uint32_t halves = a.tensors.halves;
  uint32_t per_pair = halves * a.layer_count;
  uint32_t items = a.pair_count * per_pair;
  uint32_t words = static_cast<uint32_t>(a.tensors.chunk_bytes / 16);
  for (uint32_t item = blockIdx.x; item < items; item += gridDim.x) {
    uint32_t p = item / per_pair;
    uint32_t layer = a.layer_first + item % per_pair / halves;
    uint32_t half = item % halves;
    uint8_t* dev = chunk_at(a.tensors, a.device_ids[p], layer, half);
    uint8_t* host = a.host + uint64_t{a.host_ids[p]} * a.host_block_bytes
                    + (halves * uint64_t{layer} + half) * a.tensors.chunk_bytes;
    if (to_device)
      copy_chunk<8>(reinterpret_cast<uint4*>(dev), reinterpret_cast<const uint4*>(host), words);
    else
      copy_chunk<8>(reinterpret_cast<uint4*>(host), reinterpret_cast<const uint4*>(dev), words);
  }
}

enum class pattern_mode { fill, poison, check };

template <pattern_mode mode>
__global__ void pattern_kernel(const __grid_constant__ pattern_args a, uint64_t poison,
                               unsigned long long* first_bad) {
  uint32_t layers = a.tensors.layers;
  uint32_t halves = a.tensors.halves;
  uint32_t items = a.count * layers * halves;
  uint64_t words = a.tensors.chunk_bytes / 8;
  for (uint32_t item = blockIdx.x; item < items; item += gridDim.x) {
    uint32_t b = item / (halves * layers);
    uint32_t layer = item / halves % layers;
    uint32_t half = item % halves;
    auto* chunk = reinterpret_cast<uint64_t*>(chunk_at(a.tensors, a.blocks[b], layer, half));
    uint64_t seed = chunk_seed(a.hashes[b], layer, static_cast<kv_half>(half));
    for (uint64_t w = threadIdx.x; w < words; w += blockDim.x) {
      if constexpr (mode == pattern_mode::fill)
        chunk[w] = pattern_word(seed, w);
      else if constexpr (mode == pattern_mode::poison)
        chunk[w] = poison;
      else if (chunk[w] != pattern_word(seed, w))
        atomicMin(first_bad, (static_cast<unsigned long long>(item) << 32) | w);
    }
  }
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Spins on the global timer rather than on SM cycles: the duration then holds whatever clock
/// the SMs run at.
__global__ void busy_kernel(uint64_t spin_ns) {
  uint64_t t0 = global_ns();
  while (global_ns() - t0 < spin_ns) {
  }
}

__global__ void timer_probe_kernel(unsigned long long* tick_ns) {
  constexpr int changes_max = 64;
  constexpr int reads_max = 1 << 22;
  uint64_t prev = global_ns();
  uint64_t best = ~0ull;
  int changes = 0;
  for (int i = 0; i < reads_max && changes < changes_max; ++i) {
    uint64_t t = global_ns();
    if (t != prev) {
      best = min(best, t - prev);
      prev = t;
      ++changes;
    }
  }
  *tick_ns = best;
}

uint32_t grid_for(uint32_t items, uint32_t cap) {
  return std::max<uint32_t>(1, std::min(items, cap));
}

template <pattern_mode mode>
void launch_pattern(const pattern_args& a, uint64_t poison, unsigned long long* first_bad,
                    cudaStream_t stream) {
  uint32_t items = a.count * a.tensors.layers * a.tensors.halves;
  if (items == 0)
    return;
  pattern_kernel<mode><<<grid_for(items, ctas_max), pattern_threads, 0, stream>>>(a, poison,
                                                                                 first_bad);
  KVTIER_CUDA_CHECK_LAUNCH(pattern_kernel);
}

uint32_t slot_units(const slot_args& args) {
  uint32_t words = static_cast<uint32_t>(args.tensors.chunk_bytes / 16);
  uint32_t pieces = (words + piece_words - 1) / piece_words;
  return args.tensors.halves * args.window.slice_count * pieces;
}

}  // namespace

void launch_gather(const slot_args& args, cudaStream_t stream) {
  slot_kernel<true><<<grid_for(slot_units(args), ctas_max), copy_threads, 0, stream>>>(args);
  KVTIER_CUDA_CHECK_LAUNCH(gather_kernel);
}

void launch_scatter(const slot_args& args, cudaStream_t stream) {
  slot_kernel<false><<<grid_for(slot_units(args), ctas_max), copy_threads, 0, stream>>>(args);
  KVTIER_CUDA_CHECK_LAUNCH(scatter_kernel);
}

void launch_zero_copy(const zero_copy_args& args, transfer_direction d, uint32_t ctas,
                      cudaStream_t stream) {
  uint32_t items = args.tensors.halves * args.layer_count * args.pair_count;
  if (items == 0)
    return;
  uint32_t grid = grid_for(items, ctas);
  if (d == transfer_direction::h2d)
    zero_copy_kernel<true><<<grid, zero_copy_threads, 0, stream>>>(args);
  else
    zero_copy_kernel<false><<<grid, zero_copy_threads, 0, stream>>>(args);
  KVTIER_CUDA_CHECK_LAUNCH(zero_copy_kernel);
}

void launch_fill(const pattern_args& args, cudaStream_t stream) {
  launch_pattern<pattern_mode::fill>(args, 0, nullptr, stream);
}

void launch_poison(const pattern_args& args, uint8_t byte, cudaStream_t stream) {
  launch_pattern<pattern_mode::poison>(args, 0x0101010101010101ull * byte, nullptr, stream);
}

void launch_check(const pattern_args& args, unsigned long long* first_bad, cudaStream_t stream) {
  launch_pattern<pattern_mode::check>(args, 0, first_bad, stream);
}

void launch_busy(uint64_t spin_ns, cudaStream_t stream) {
  busy_kernel<<<1, 1, 0, stream>>>(spin_ns);
  KVTIER_CUDA_CHECK_LAUNCH(busy_kernel);
}

void launch_timer_probe(unsigned long long* tick_ns, cudaStream_t stream) {
  timer_probe_kernel<<<1, 1, 0, stream>>>(tick_ns);
  KVTIER_CUDA_CHECK_LAUNCH(timer_probe_kernel);
}

void preload_kernels() {
  cudaFuncAttributes attr;
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, slot_kernel<true>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, slot_kernel<false>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, zero_copy_kernel<true>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, zero_copy_kernel<false>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, pattern_kernel<pattern_mode::fill>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, pattern_kernel<pattern_mode::poison>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, pattern_kernel<pattern_mode::check>));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, busy_kernel));
  KVTIER_CUDA_CHECK(cudaFuncGetAttributes(&attr, timer_probe_kernel));
}

}  // namespace kvtier::gpu::detail
