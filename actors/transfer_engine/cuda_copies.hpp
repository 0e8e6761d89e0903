#pragma once

// PCIe copies on the GPU (cuda_device.hpp): staged batched copies with per-layer events. With
// --verify every swap-in's blocks are checked on arrival and storage payloads are kept and
// restored through host memory.

#include <memory>

#include <absl/container/flat_hash_map.h>

#include "actors/device/cuda_device.hpp"
#include "actors/transfer_engine/copy_backend.hpp"

namespace kvtier {

class cuda_copies : public copy_backend {
 public:
  explicit cuda_copies(std::shared_ptr<cuda_device> device) : device_(std::move(device)) {}

  std::string name() const override { return "cuda"; }
  std::string device() const override { return device_->device_name(); }
  void expect(const transfer& t) override;
  void start(const transfer& t) override;
  void fill(const transfer& t) override { device_->fill(t); }
  std::string before_store(const transfer& t) override { return device_->keep(t); }
  std::string after_load(const transfer& t) override { return device_->restore(t); }
  void on_device_event(uint64_t op, int32_t layer, copy_events& events) override;
  /// The host block itself; a load's bytes are written into the host block and checked there.
  std::vector<uint8_t> storage_payload(const block_move& b, uint64_t) override {
    return device_->host_payload(b.host_block);
  }
  /// A load's bytes are read straight into its host blocks and checked there.
  std::vector<payload_destination> load_destinations(const transfer& t, uint64_t) override;
  std::string loaded(const transfer& t, uint64_t bytes, bool found) override;

 private:
  std::shared_ptr<cuda_device> device_;
  absl::flat_hash_map<uint64_t, transfer> running_;  // by op
};

}  // namespace kvtier
