#pragma once

// Where the transfer engine's PCIe copies run: on the modelled links (modelled_copies.hpp) or on
// the GPU (cuda_copies.hpp), and with --verify through verified_copies.hpp, which checks the
// bytes of either wherever they land. The engine owns the transfers, their order and the
// network to storage; a backend only moves device and host blocks and says when they have moved.
// Whoever assembles the deployment picks the backend once (transfer_engine_options::copies);
// the engine makes its own from that choice when it starts.
//
//   swap-in        host -> device, layer by layer: a layer_done per layer, then copy_done
//   backup, write-back   device -> host, all layers at once: copy_done
//   fill           --verify: a step produced these device blocks; marked at once
//
// Storage payloads pass through host memory. When storage keeps bytes (storage.backend is not
// `model`), a store carries each block's bytes from the copy backend (the host block on the GPU,
// the block's hash pattern when modelled) and a load's bytes are read straight into memory the
// copy backend names (the host block on the GPU, a reused buffer when modelled) and checked
// there. When storage is modelled, verified_copies keeps the bytes a store read itself and puts
// them back at the load (before_store / after_load).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "model/links/link_model.hpp"

namespace kvtier {

struct transfer_engine_options;

/// What a backend reports to the engine.
class copy_events {
 public:
  virtual ~copy_events() = default;
  /// The next layer of swap-in `transfer` is in device memory now.
  virtual void layer_done(uint64_t transfer) = 0;
  /// Copy `transfer` is done: measured on the device (-1: the engine's clock tells), or failed.
  virtual void copy_done(uint64_t transfer, int64_t measured_ns, const std::string& error) = 0;
};

class copy_backend {
 public:
  virtual ~copy_backend() = default;
  virtual std::string name() const = 0;
  /// The device the copies run on (empty when modelled).
  virtual std::string device() const { return {}; }

  /// A swap-in or a device -> host copy arrived; it starts once the transfers it follows are
  /// done.
  virtual void expect(const transfer& t) = 0;
  /// Starts a swap-in or a device -> host copy.
  virtual void start(const transfer& t) = 0;
  /// A completion from the device (op, layer; -1: the whole op) reached the engine.
  virtual void on_device_event(uint64_t op, int32_t layer, copy_events& events) = 0;
  /// Storage keeps bytes: the `bytes` of block `b` that a store sends.
  virtual std::vector<uint8_t> storage_payload(const block_move& b, uint64_t bytes) = 0;
  /// Storage keeps bytes: where load `t`'s bytes are read to, one destination of `bytes` per
  /// block (the host blocks on the GPU, buffers of the backend's own when modelled), left alone
  /// until loaded(t).
  virtual std::vector<payload_destination> load_destinations(const transfer& t,
                                                             uint64_t bytes) = 0;
  /// Load `t` is over; `found`: every block's bytes came. Returns "" or what is wrong with them
  /// (checked only when found). Either way its destinations are the backend's again.
  virtual std::string loaded(const transfer& t, uint64_t bytes, bool found) = 0;

  // -- --verify: only verified_copies marks and checks; a plain backend does nothing here ----

  /// Marks the device blocks a step produced (checked wherever they land later).
  virtual void fill(const transfer&) {}
  /// A store is about to read these host blocks / a load has written them: "" or what is wrong.
  virtual std::string before_store(const transfer&) { return {}; }
  virtual std::string after_load(const transfer&) { return {}; }
};

/// Starts flow `ops` of transfer `id` over `links` on the engine's link model.
using flow_starter = std::function<void(uint64_t id, std::vector<link_model::link_id> links,
                                        std::vector<link_model::op> ops)>;

/// Makes an engine's copy backend as the engine starts, given the engine's settings, its link
/// model and how to start flows on it. Each engine makes its own (an instance's settings are
/// copied per instance), so this is a recipe, not a backend.
using copy_backend_factory = std::function<std::unique_ptr<copy_backend>(
  const transfer_engine_options& options, link_model& links, flow_starter start)>;

/// The modelled PCIe links (modelled_copies.hpp): every engine's unless told otherwise.
std::unique_ptr<copy_backend> make_modelled_copies(const transfer_engine_options& options,
                                                   link_model& links, flow_starter start);

}  // namespace kvtier
