#pragma once

// PCIe copies on the GPU (cuda_device.hpp): staged batched copies with per-layer events. It
// lends its device and host blocks to verified_copies, which --verify puts around it.

#include <memory>

#include <absl/container/flat_hash_map.h>

#include "actors/device/cuda_device.hpp"
#include "actors/transfer_engine/copy_backend.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"
#include "actors/transfer_engine/verified_copies.hpp"

namespace kvtier {

class cuda_copies : public copy_backend, public block_memory {
 public:
  explicit cuda_copies(std::shared_ptr<cuda_device> device) : device_(std::move(device)) {}

  std::string name() const override { return "cuda"; }
  std::string device() const override { return device_->device_name(); }
  void expect(const transfer& t) override;
  void start(const transfer& t) override;
  void on_device_event(uint64_t op, int32_t layer, copy_events& events) override;
  /// The host block itself; a load's bytes are written into the host block and checked there.
  std::vector<uint8_t> storage_payload(const block_move& b, uint64_t) override {
    return device_->host_payload(b.host_block);
  }
  /// A load's bytes are read straight into its host blocks.
  std::vector<payload_destination> load_destinations(const transfer& t, uint64_t) override;
  std::string loaded(const transfer&, uint64_t, bool) override { return {}; }

  // -- block_memory --
  void mark_device(const transfer& t) override { device_->fill(t); }
  std::string check_device(const transfer& t) override { return device_->check_device_blocks(t); }
  std::string check_host(const block_move& b) override { return device_->check_host_block(b); }
  std::vector<uint8_t> read_host(uint32_t host_block) override {
    return device_->host_payload(host_block);
  }
  void write_host(uint32_t host_block, const std::vector<uint8_t>& bytes) override {
    device_->write_host_block(host_block, bytes);
  }

 private:
  std::shared_ptr<cuda_device> device_;
  absl::flat_hash_map<uint64_t, uint64_t> running_;  // transfer id by op
};

/// Whether the GPU's copies are checked (--verify).
enum class copy_checks : uint8_t { none, verify };

/// Points `o` at `gpu`: its copies run there, checked by verified_copies with
/// copy_checks::verify, and blocks are the GPU's size.
void use_cuda_copies(transfer_engine_options& o, std::shared_ptr<cuda_device> gpu,
                     copy_checks checks);

}  // namespace kvtier
