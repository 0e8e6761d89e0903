#include "actors/transfer_engine/cuda_backend.hpp"

#include <cstring>

#include "actors/check.hpp"

namespace kvtier {

namespace {

std::vector<gpu::block_pair> pairs_of(const transfer& t) {
  std::vector<gpu::block_pair> out;
  out.reserve(t.blocks.size());
  for (const block_move& b : t.blocks)
    out.push_back({b.device_block, b.host_block});
  return out;
}

std::vector<gpu::block_pattern> patterns_of(const transfer& t) {
  std::vector<gpu::block_pattern> out;
  out.reserve(t.blocks.size());
  for (const block_move& b : t.blocks)
    out.push_back({b.device_block, b.hash});
  return out;
}

}  // namespace

cuda_backend::cuda_backend(const cuda_backend_options& options,
                           gpu::completion_callback on_complete)
  : options_(options) {
  gpu::kv_cache_config c;
  c.shape = options.shape;
  c.device_blocks = options.device_blocks;
  c.host_blocks = options.host_blocks;
  c.on_complete = std::move(on_complete);
  cache_ = gpu::make_kv_cache(c);
}

std::string cuda_backend::device_name() const {
  return cache_->device().name;
}

uint64_t cuda_backend::submit(const transfer& t) {
  auto kind = static_cast<move_kind>(t.kind);
  if (kind == move_kind::swap_in)
    return cache_->submit_h2d(pairs_of(t));
  KVTIER_ASSERT(kind == move_kind::d2h);
  return cache_->submit_d2h(pairs_of(t));
}

void cuda_backend::fill(const transfer& t) {
  cache_->fill_device_blocks(patterns_of(t));
}

std::string cuda_backend::check_arrived(const transfer& t) {
  if (!options_.verify)
    return {};
  auto bad = cache_->check_device_blocks(patterns_of(t));
  return bad ? to_string(*bad) : std::string{};
}

std::string cuda_backend::keep(const transfer& t) {
  if (!options_.verify)
    return {};
  uint64_t bytes = block_bytes();
  for (const block_move& b : t.blocks) {
    auto& copy = stored_[b.storage_key];
    if (copy.empty()) {
      stored_bytes_ += bytes;
      if (stored_bytes_ > options_.payload_limit_bytes)
        return "verify: storage payloads exceed " + std::to_string(options_.payload_limit_bytes)
               + " bytes; replay fewer blocks with --verify";
      copy.resize(bytes);
    }
    std::memcpy(copy.data(), cache_->host_block(b.host_block), bytes);
  }
  return {};
}

std::string cuda_backend::restore(const transfer& t) {
  if (!options_.verify)
    return {};
  for (const block_move& b : t.blocks) {
    auto it = stored_.find(b.storage_key);
    if (it == stored_.end())
      return "verify: storage read block " + std::to_string(b.hash) + " that was never stored";
    std::byte* host = cache_->host_block(b.host_block);
    std::memcpy(host, it->second.data(), it->second.size());
    if (auto bad = gpu::check_host_block(host, options_.shape, b.hash, b.host_block))
      return "after a storage read: " + to_string(*bad);
  }
  return {};
}

std::vector<uint8_t> cuda_backend::host_payload(uint32_t host_block) {
  const auto* p = reinterpret_cast<const uint8_t*>(cache_->host_block(host_block));
  return std::vector<uint8_t>(p, p + block_bytes());
}

std::string cuda_backend::restore_payload(const block_move& b, const std::vector<uint8_t>& payload) {
  if (payload.size() != block_bytes())
    return "verify: storage returned " + std::to_string(payload.size()) + " bytes for block " +
           std::to_string(b.hash) + " of " + std::to_string(block_bytes());
  std::byte* host = cache_->host_block(b.host_block);
  std::memcpy(host, payload.data(), payload.size());
  if (!options_.verify)
    return {};
  if (auto bad = gpu::check_host_block(host, options_.shape, b.hash, b.host_block))
    return "after a storage read: " + to_string(*bad);
  return {};
}

uint64_t cuda_backend::submit_compute(int64_t lead_ns, const std::vector<int64_t>& layer_ns,
                                      uint64_t after_op) {
  std::vector<uint64_t> ns(layer_ns.begin(), layer_ns.end());
  return cache_->submit_compute(ns, after_op, static_cast<uint64_t>(lead_ns));
}

int64_t cuda_backend::stall_of(uint64_t compute_op) {
  return static_cast<int64_t>(cache_->compute_time(compute_op).stall_total_ns);
}

int64_t cuda_backend::duration_of(uint64_t transfer_op) {
  return static_cast<int64_t>(cache_->transfer_time(transfer_op).total_ns);
}

void cuda_backend::release(uint64_t op) {
  cache_->release(op);
}

}  // namespace kvtier
