#pragma once

// Block payloads in this process's memory, one map per node. Every call completes inline (it never
// blocks on I/O), so it runs in deterministic virtual-time replays too; the storage actor then
// keeps modelling the media's timing while real bytes travel.

#include <mutex>

#include <absl/container/flat_hash_map.h>

#include "storage/storage_backend.hpp"

namespace kvtier {

class memory_backend final : public storage_backend {
 public:
  explicit memory_backend(uint32_t nodes);

  std::string name() const override { return "memory"; }
  bool asynchronous() const override { return false; }
  void exists(std::vector<block_ref> blocks, exists_done done) override;
  void get(std::vector<block_ref> blocks, std::vector<block_span> into, get_done done) override;
  void put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
           put_done done) override;
  void remove(std::vector<block_ref> blocks, remove_done done) override;
  void list(list_done done) override;
  backend_counters counters() const override;

 private:
  mutable std::mutex mutex_;
  std::vector<absl::flat_hash_map<uint64_t, block_bytes_t>> nodes_;  // by hash, per node
  backend_counters counters_;
};

}  // namespace kvtier
