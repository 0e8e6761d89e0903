// Verification on the device: fill, poison and check whole blocks (every layer, K and V) on the
// compute stream, where a real model would write KV.

#include <algorithm>

#include "gpu/cuda/cuda_kv_cache.cuh"

namespace kvtier::gpu::detail {

namespace {

void check_blocks_exist(uint32_t block, uint32_t device_blocks) {
  if (block >= device_blocks)
    throw gpu_error("device block " + std::to_string(block) + " is out of range [0, "
                    + std::to_string(device_blocks) + ")");
}

/// Runs `launch` over `blocks` in groups that fit one kernel's parameters.
template <class Fill, class Launch>
void for_each_group(size_t count, pattern_args& args, Fill fill, Launch launch) {
  for (size_t first = 0; first < count; first += pattern_blocks_max) {
    args.count = static_cast<uint32_t>(std::min<size_t>(pattern_blocks_max, count - first));
    for (uint32_t k = 0; k < args.count; ++k)
      fill(k, first + k);
    launch(first);
  }
}

}  // namespace

void cuda_kv_cache::fill_device_blocks(const std::vector<block_pattern>& blocks) {
  select_device();
  for (const block_pattern& b : blocks)
    check_blocks_exist(b.block, layout_.device_blocks);
  pattern_args args;
  args.tensors = tensors();
  for_each_group(
      blocks.size(), args,
      [&](uint32_t k, size_t i) {
        args.blocks[k] = blocks[i].block;
        args.hashes[k] = blocks[i].hash;
      },
      [&](size_t) { launch_fill(args, compute_.get()); });
}

void cuda_kv_cache::poison_device_blocks(const std::vector<uint32_t>& blocks, uint8_t byte) {
  select_device();
  for (uint32_t b : blocks)
    check_blocks_exist(b, layout_.device_blocks);
  pattern_args args;
  args.tensors = tensors();
  for_each_group(
      blocks.size(), args, [&](uint32_t k, size_t i) { args.blocks[k] = blocks[i]; },
      [&](size_t) { launch_poison(args, byte, compute_.get()); });
}

std::optional<verify_mismatch> cuda_kv_cache::check_device_blocks(
    const std::vector<block_pattern>& blocks) {
  select_device();
  for (const block_pattern& b : blocks)
    check_blocks_exist(b.block, layout_.device_blocks);
  cudaStream_t s = compute_.get();
  auto* result = reinterpret_cast<unsigned long long*>(check_result_->get());
  auto* readback = reinterpret_cast<unsigned long long*>(check_readback_->get());
  uint32_t layers = layout_.shape.layers;
  pattern_args args;
  args.tensors = tensors();
  std::optional<verify_mismatch> bad;
  for_each_group(
      blocks.size(), args,
      [&](uint32_t k, size_t i) {
        args.blocks[k] = blocks[i].block;
        args.hashes[k] = blocks[i].hash;
      },
      [&](size_t first) {
        if (bad)
          return;
        KVTIER_CUDA_CHECK(cudaMemsetAsync(result, 0xff, sizeof *result, s));
        launch_check(args, result, s);
        KVTIER_CUDA_CHECK(
            cudaMemcpyAsync(readback, result, sizeof *result, cudaMemcpyDeviceToHost, s));
        KVTIER_CUDA_CHECK(cudaStreamSynchronize(s));
        if (readback[0] == ~0ull)
          return;
        uint32_t item = static_cast<uint32_t>(readback[0] >> 32);
        uint64_t word = readback[0] & 0xffffffffull;
        uint32_t halves = layout_.halves();
        const block_pattern& b = blocks[first + item / (halves * layers)];
        verify_mismatch m;
        m.on_device = true;
        m.block = b.block;
        m.layer = item / halves % layers;
        m.half = static_cast<kv_half>(item % halves);
        m.byte_offset = 8 * word;
        m.hash = b.hash;
        m.expected = pattern_word(chunk_seed(b.hash, m.layer, m.half), word);
        const uint8_t* at = tensors_->chunk(b.block, m.layer, m.half) + m.byte_offset;
        KVTIER_CUDA_CHECK(
            cudaMemcpyAsync(readback + 1, at, sizeof *readback, cudaMemcpyDeviceToHost, s));
        KVTIER_CUDA_CHECK(cudaStreamSynchronize(s));
        m.found = readback[1];
        bad = m;
      });
  return bad;
}

}  // namespace kvtier::gpu::detail
