#include "runtime/deployment.hpp"

#include <iostream>
#include <memory>
#include <stdexcept>

#include "actors/messages.hpp"
#include "runtime/config/options.hpp"
#include "runtime/storage_check.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

void configure_wall_clock(caf::actor_system_config& cfg, size_t threads) {
  cfg.set("scheduler.max-threads", threads);
  // CAF's default middle stage polls every 50 us, whose timer slack stretches to ~100 us: a
  // wake-up of `kvtier serve`'s worker cost a call that much, and between a wall-clock replay's
  // events the polling of idle workers took the cores the storage backend's threads need
  // (tools/bench-storage's check replay: 12.8 s of CPU in its 24 s with it, 5.3 s without, on 2
  // cores). Without it an idle worker spins briefly, then sleeps until an enqueue signals it.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
}

// Byte-carrying storage: the pool is checked against where its bytes go, then the backend is made
// (connections opened, directories made) before the clock starts; the transfer engine then sends
// real bytes with every store. On the GPU a block's payload is its host block. The check comes
// first and touches nothing, so a pool refused at start leaves nothing behind (no directories).
void prepare_storage(timed_config& config) {
  if (config.storage_backend.kind == "model")
    return;
  try {
    prepare_redis_access(config.storage_backend.redis_auth);  // TLS: the pre-start check uses it
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  config.engine.storage_payload_bytes =
    config.engine.gpu ? config.engine.gpu->block_bytes() : config.storage_payload_bytes;
  // Backpressure: what may be in flight bounds what the process holds for storage at once
  // (docs/design.md "Bytes in flight to storage"), and is said at start where real I/O runs.
  machine_memory machine = read_machine_memory();
  uint64_t inflight = config.storage_max_inflight_bytes > 0 ? config.storage_max_inflight_bytes
                                                            : default_inflight_bytes(machine);
  config.engine.storage_inflight_bytes = inflight;
  check_storage_room(config, inflight, machine, std::cerr);
  std::unique_ptr<storage_backend> backend;
  try {
    backend = make_storage_backend(config.storage_backend);
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  if (!backend)
    return;
  if (backend->asynchronous())
    std::cerr << "kvtier: storage (" << backend->name() << "): at most "
              << (inflight >= (1u << 20) ? std::to_string(inflight >> 20) + " MiB"
                                         : std::to_string(inflight) + " bytes")
              << " of block payloads in flight (storage.max_inflight_bytes"
              << (config.storage_max_inflight_bytes > 0 ? "" : ", 1/32 of this machine's memory")
              << "); stores and loads past it wait\n";
  if (std::string note = backend->start_note(); !note.empty())
    std::cerr << "kvtier: storage (" << backend->name() << "): " << note << "\n";
  config.storage.backend = std::move(backend);
}

}  // namespace kvtier
