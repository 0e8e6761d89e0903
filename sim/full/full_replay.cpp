#include "sim/full/full_replay.hpp"

#include <mutex>
#include <stdexcept>
#include <thread>

#include "caf/scheduler/test_coordinator.hpp"

#include "actors/cache_controller/cache_controller.hpp"
#include "actors/storage/storage.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"

namespace kvtier {

namespace {

struct actors {
  storage_actor storage;
  transfer_engine_actor engine;
  cache_controller_actor controller;
  scheduler_actor scheduler;
};

// Where the CUDA backend's completions go: they come on a CUDA thread, so they become messages
// to the engine (set once it exists, before any transfer can be submitted).
struct gpu_completions {
  std::mutex mutex;
  caf::weak_actor_ptr engine;

  void operator()(uint64_t op, int layer) {
    std::lock_guard<std::mutex> guard(mutex);
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(engine))
      caf::anon_send(caf::actor_cast<transfer_engine_actor>(strong), gpu_done_atom_v, op,
                     static_cast<int32_t>(layer));
  }
};

// Real backend: the CUDA cache is made (device and pinned host memory allocated, compute
// calibrated) before the replay's clock starts, so no request is charged for it.
std::shared_ptr<gpu_completions> prepare_backend(timed_config& config) {
  if (!config.cuda)
    return nullptr;
  auto completions = std::make_shared<gpu_completions>();
  config.engine.gpu = std::make_shared<cuda_backend>(
    config.cuda_options, [completions](uint64_t op, int layer) { (*completions)(op, layer); });
  config.engine.block_bytes = config.engine.gpu->block_bytes();
  return completions;
}

// Byte-carrying storage: the backend is made (connections opened, directories made) before the
// clock starts; the transfer engine then sends real bytes with every store. On the GPU a block's
// payload is its host block.
void prepare_storage(timed_config& config) {
  std::unique_ptr<storage_backend> backend;
  try {
    backend = make_storage_backend(config.storage_backend);
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  if (!backend)
    return;
  config.storage.backend = std::move(backend);
  config.engine.storage_payload_bytes =
    config.engine.gpu ? config.engine.gpu->block_bytes() : config.storage_payload_bytes;
}

actors spawn_all(caf::actor_system& sys, timed_config config, request_source source,
                 const sim_clock& clock, const std::shared_ptr<gpu_completions>& completions) {
  config.storage.clock = clock;
  config.engine.clock = clock;
  config.scheduler.clock = clock;
  actors a;
  a.storage = spawn_storage(sys, config.storage);
  a.engine = spawn_transfer_engine(sys, config.engine, a.storage);
  if (completions) {
    std::lock_guard<std::mutex> guard(completions->mutex);
    completions->engine = caf::actor_cast<caf::weak_actor_ptr>(a.engine);
    config.scheduler.gpu_engine = a.engine;
  }
  a.controller = spawn_cache_controller(sys, config.cache, config.controller, a.storage, a.engine);
  a.scheduler = spawn_scheduler(sys, config.scheduler, std::move(source), a.controller);
  return a;
}

// Asks every actor for its report; `pump` runs the system while a request waits (virtual time
// needs it, the wall clock does not).
template <class Pump>
void collect_reports(caf::scoped_actor& self, const actors& a, full_result& r, Pump pump) {
  auto ask = [&](auto handle, auto& out) {
    auto pending = self->request(handle, caf::infinite, report_atom_v);
    pump();
    pending.receive([&](std::decay_t<decltype(out)>& x) { out = std::move(x); },
                    [&](const caf::error& e) { throw std::runtime_error(caf::to_string(e)); });
  };
  ask(a.scheduler, r.scheduler);
  ask(a.controller, r.controller);
  ask(a.engine, r.engine);
  ask(a.storage, r.storage);
}

void stop_all(const actors& a) {
  caf::anon_send_exit(a.scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(a.controller, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(a.engine, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(a.storage, caf::exit_reason::user_shutdown);
}

full_result run_virtual(timed_config config, request_source source,
                        const full_run_options& options) {
  prepare_storage(config);
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
  caf::actor_system sys{cfg};
  auto& coordinator = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  sim_clock clock(sys.clock().now(), 1.0);
  actors a = spawn_all(sys, config, std::move(source), clock, nullptr);
  config.storage.backend.reset();  // the storage actor owns it now: it goes before the system
  full_result r;
  for (;;) {
    r.messages += coordinator.run();
    if (options.progress)
      options.progress();
    if ((options.stop && options.stop()) || !coordinator.trigger_timeout())
      break;
  }
  r.last_event_ns = clock.now(sys.clock());
  caf::scoped_actor self{sys, true};
  collect_reports(self, a, r, [&] { coordinator.run(); });
  stop_all(a);
  coordinator.run();
  return r;
}

full_result run_wall(timed_config config, request_source source,
                     const full_run_options& options) {
  auto completions = prepare_backend(config);
  prepare_storage(config);
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(options.threads));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
  caf::actor_system sys{cfg};
  sim_clock clock(sys.clock().now(), options.speed);
  actors a = spawn_all(sys, config, std::move(source), clock, completions);
  config.storage.backend.reset();  // the storage actor owns it now: it goes before the system
  caf::scoped_actor self{sys};
  full_result r;
  // Poll until every request finished and the controller holds and moves nothing.
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (options.progress)
      options.progress();
    if (options.stop && options.stop())
      break;
    bool drained = false, idle = false;
    self->request(a.scheduler, caf::infinite, report_atom_v)
      .receive([&](scheduler_report& s) { drained = s.drained; },
               [&](const caf::error& e) { throw std::runtime_error(caf::to_string(e)); });
    if (!drained)
      continue;
    self->request(a.controller, caf::infinite, caf::get_atom_v)
      .receive([&](bool x) { idle = x; },
               [&](const caf::error& e) { throw std::runtime_error(caf::to_string(e)); });
    if (idle)
      break;
  }
  r.last_event_ns = clock.now(sys.clock());
  collect_reports(self, a, r, [] {});
  stop_all(a);
  return r;
}

}  // namespace

full_result run_full_replay(const timed_config& config, request_source source,
                            const full_run_options& options) {
  if (config.cuda && options.mode != clock_mode::wall)
    throw std::invalid_argument("the CUDA backend runs on the wall clock only");
  const std::string& kind = config.storage_backend.kind;
  if ((kind == "redis" || kind == "file") && options.mode != clock_mode::wall)
    throw config_error("storage.backend=" + kind + " does real I/O: it runs on the wall clock "
                       "only (--clock wall)");
  if (options.mode == clock_mode::virtual_time)
    return run_virtual(config, std::move(source), options);
  return run_wall(config, std::move(source), options);
}

}  // namespace kvtier
