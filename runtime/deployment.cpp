#include "runtime/deployment.hpp"

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <iostream>
#include <memory>
#include <stdexcept>

#include "actors/messages.hpp"
#include "actors/transfer_engine/cuda_copies.hpp"
#include "runtime/config/options.hpp"
#include "runtime/storage_check.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

namespace {

// Under an engine's scheduling (kvtier serve) an instance is its block machinery alone.
instance spawn_controller_side(caf::actor_system& sys, const instance_config& ic,
                               const storage_actor& storage) {
  controller_stack stack =
    spawn_controller_stack(sys, ic.cache, ic.controller, ic.engine, storage);
  instance x;
  x.name = ic.name;
  x.role = ic.role;
  x.controller = stack.controller;
  x.engine = stack.engine;
  return x;
}

}  // namespace

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
#ifdef __linux__
  // Linux lets a timed wait run late by its thread's timer slack, 50 us unless set: CAF's clock
  // thread then wakes a modelled copy's completion (a step's swap-in, which a modelled `kvtier
  // serve` step reply waits for) up to that much after it is due, more than the copy itself
  // takes at `--speed 1000`. Threads inherit the slack: set here, before the actor system
  // starts its threads (BENCHMARKS.md, "Calls read from their bytes").
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

std::shared_ptr<cuda_device> prepare_gpu(deployment_plan& plan) {
  if (plan.backend == copy_backend_kind::modelled)
    return nullptr;
  auto gpu = std::make_shared<cuda_device>(plan.cuda);
  for (instance_config& ic : plan.instances)
    use_cuda_copies(ic.engine, gpu, plan.cuda.verify ? copy_checks::verify : copy_checks::none);
  // On the GPU a block's payload is its host block.
  if (plan.storage.backend.kind != storage_backend_kind::model)
    plan.storage.payload_bytes = gpu->block_bytes();
  return gpu;
}

// Byte-carrying storage: the pool is checked against where its bytes go, then the backend is made
// (connections opened, directories made) before the clock starts; the transfer engine then sends
// real bytes with every store. The check comes first and touches nothing, so a pool refused at
// start leaves nothing behind (no directories).
void prepare_storage(deployment_plan& plan) {
  if (plan.storage.backend.kind == storage_backend_kind::model)
    return;
  try {
    prepare_redis_access(plan.storage.backend.redis_auth);  // TLS: the pre-start check uses it
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  // Backpressure: what may be in flight bounds what the process holds for storage at once
  // (docs/design.md "Bytes in flight to storage"), and is said at start where real I/O runs.
  machine_memory machine = read_machine_memory();
  const bool configured = plan.storage.max_inflight_bytes > 0;
  if (!configured)
    plan.storage.max_inflight_bytes = default_inflight_bytes(machine);
  uint64_t inflight = plan.storage.max_inflight_bytes;
  check_storage_room(plan, inflight, machine, std::cerr);
  std::unique_ptr<storage_backend> backend;
  try {
    backend = make_storage_backend(plan.storage.backend);
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
              << (configured ? "" : ", 1/32 of this machine's memory")
              << "); stores and loads past it wait\n";
  if (std::string note = backend->start_note(); !note.empty())
    std::cerr << "kvtier: storage (" << backend->name() << "): " << note << "\n";
  plan.storage.pool.backend = std::move(backend);
}

deployment spawn_deployment(caf::actor_system& sys, deployment_plan& plan, const sim_clock& clock,
                            std::shared_ptr<request_feed> feed) {
  deployment d;
  {
    storage_options pool = plan.storage.pool;
    pool.clock = clock;
    d.storage = spawn_storage(sys, pool);
  }
  plan.storage.pool.backend.reset();  // the storage actor owns it now: it goes before the system
  // storage.max_inflight_bytes bounds the process: each instance's engine takes its share.
  const bool bytes = plan.storage.backend.kind != storage_backend_kind::model;
  const uint64_t inflight_share = bytes ? plan.storage.max_inflight_bytes / plan.instances.size() : 0;
  for (const instance_config& planned : plan.instances) {
    instance_config ic = planned;
    ic.scheduler.clock = clock;
    ic.controller.clock = clock;
    ic.engine.clock = clock;
    ic.engine.storage_payload_bytes = bytes ? plan.storage.payload_bytes : 0;
    ic.engine.storage_inflight_bytes = inflight_share;
    d.instances.push_back(plan.scheduler == scheduling::kvtier
                            ? spawn_instance(sys, ic, d.storage)
                            : spawn_controller_side(sys, ic, d.storage));
  }
  if (plan.scheduler == scheduling::engine)
    return d;
  front_end_config fc = plan.front;
  fc.clock = clock;
  std::vector<front_end_target> targets;
  for (const instance& x : d.instances)
    targets.push_back({x.scheduler, x.controller, x.role});
  d.front_end = spawn_front_end(sys, fc, std::move(feed), std::move(targets));
  return d;
}

void stop_deployment(const deployment& d) {
  caf::anon_send_exit(d.front_end, caf::exit_reason::user_shutdown);
  for (const instance& x : d.instances)
    stop_instance(x);
  caf::anon_send_exit(d.storage, caf::exit_reason::user_shutdown);
}

}  // namespace kvtier
