#pragma once

// --verify as a decorator: a copy backend whose every block is checked against its hash's
// pattern wherever it lands (docs/gpu.md). It forwards each copy to the backend it wraps and
// adds the checks around it:
//   fill         writes each computed block's pattern into its device block;
//   swap-in      once done, its device blocks must hold their patterns;
//   store/load   with modelled storage it keeps the bytes a store read out of host memory and
//                puts them back at the load; with byte-carrying storage the bytes come back by
//                themselves; either way the loaded host blocks must hold their patterns.
// The backend it wraps knows nothing of this: it only lends its blocks (block_memory).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "actors/transfer_engine/copy_backend.hpp"

namespace kvtier {

/// The device and host blocks a copy backend moves, as verified_copies reads and writes them.
class block_memory {
 public:
  virtual ~block_memory() = default;
  /// Writes each block's pattern into its device block.
  virtual void mark_device(const transfer& t) = 0;
  /// "" if each device block of `t` holds its pattern, else what is wrong.
  virtual std::string check_device(const transfer& t) = 0;
  /// "" if host block `b.host_block` holds the pattern of `b.hash`, else what is wrong.
  virtual std::string check_host(const block_move& b) = 0;
  virtual std::vector<uint8_t> read_host(uint32_t host_block) = 0;
  virtual void write_host(uint32_t host_block, const std::vector<uint8_t>& bytes) = 0;
};

class verified_copies : public copy_backend {
 public:
  /// Checks `inner`'s copies through `memory`, its blocks (which `inner` owns); keeps at most
  /// `payload_limit_bytes` of stored blocks' bytes.
  verified_copies(std::unique_ptr<copy_backend> inner, block_memory& memory,
                  uint64_t payload_limit_bytes = 16ull << 30);

  std::string name() const override { return inner_->name(); }
  std::string device() const override { return inner_->device(); }
  void expect(const transfer& t) override;
  void start(const transfer& t) override { inner_->start(t); }
  void on_device_event(uint64_t op, int32_t layer, copy_events& events) override;
  std::vector<uint8_t> storage_payload(const block_move& b, uint64_t bytes) override {
    return inner_->storage_payload(b, bytes);
  }
  std::vector<payload_destination> load_destinations(const transfer& t, uint64_t bytes) override {
    return inner_->load_destinations(t, bytes);
  }
  std::string loaded(const transfer& t, uint64_t bytes, bool found) override;
  void fill(const transfer& t) override { memory_.mark_device(t); }
  std::string before_store(const transfer& t) override;
  std::string after_load(const transfer& t) override;

 private:
  class checked_events;

  std::unique_ptr<copy_backend> inner_;
  block_memory& memory_;
  uint64_t payload_limit_bytes_;
  absl::flat_hash_map<uint64_t, transfer> swap_ins_;  // by transfer id, until done
  absl::flat_hash_map<uint64_t, std::vector<uint8_t>> stored_;  // by storage key
  uint64_t stored_bytes_ = 0;
};

}  // namespace kvtier
