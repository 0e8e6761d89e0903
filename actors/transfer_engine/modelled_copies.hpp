#pragma once

// PCIe copies on the modelled links (link_model.hpp), which the engine's network shares:
//   h2d, d2h   one per direction;
//   pcie       both directions together (duplex cap: one direction alone gets its own limit,
//              both at once share this one).
// A swap-in is one operation per layer (latency, then K and V of every block of that layer); a
// device -> host copy is one operation for all layers. The engine's link timers complete them.

#include <map>
#include <vector>

#include "actors/transfer_engine/copy_backend.hpp"
#include "model/links/link_model.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"

namespace kvtier {

class modelled_copies : public copy_backend {
 public:
  /// Adds the PCIe links to `links`.
  modelled_copies(link_model& links, const transfer_engine_options& options, flow_starter start);

  std::string name() const override { return "modelled"; }
  void expect(const transfer&) override {}
  void start(const transfer& t) override;
  void on_device_event(uint64_t, int32_t, copy_events&) override {}
  /// No device bytes: a stored block is its hash pattern, checked when it comes back.
  std::vector<uint8_t> storage_payload(const block_move& b, uint64_t bytes) override;
  /// A load's bytes land in buffers kept for reuse (allocated once, not per load).
  std::vector<payload_destination> load_destinations(const transfer& t, uint64_t bytes) override;
  std::string loaded(const transfer& t, uint64_t bytes, bool found) override;

 private:
  link_options links_;
  uint32_t layers_;
  uint64_t block_bytes_;
  flow_starter start_flow_;
  link_model::link_id h2d_ = 0, d2h_ = 0, pcie_ = 0;
  std::vector<std::vector<uint8_t>> spare_;                       // load buffers not in use
  std::map<uint64_t, std::vector<std::vector<uint8_t>>> loading_;  // by transfer
};

}  // namespace kvtier
