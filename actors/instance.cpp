#include "actors/instance.hpp"

#include "actors/cache_controller/cache_controller.hpp"
#include "actors/device/gpu_compute.hpp"

namespace kvtier {

namespace {

// Completions come on a CUDA thread: they become messages to the actor that owns the op, held
// weakly so that a completion after shutdown goes nowhere.
template <class Handle>
compute_device::sink post_to(const Handle& who) {
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(who);
  return [weak](uint64_t op, int layer) {
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak))
      caf::anon_send(caf::actor_cast<Handle>(strong), gpu_done_atom_v, op,
                     static_cast<int32_t>(layer));
  };
}

}  // namespace

controller_stack spawn_controller_stack(caf::actor_system& sys, const cache_options& cache,
                                        const controller_options& controller,
                                        const transfer_engine_options& engine,
                                        const storage_actor& storage) {
  controller_stack x;
  x.engine = spawn_transfer_engine(sys, engine, storage);
  if (engine.gpu)
    engine.gpu->set_sinks(post_to(x.engine), nullptr);
  x.controller = spawn_cache_controller(sys, cache, controller, storage, x.engine);
  return x;
}

instance spawn_instance(caf::actor_system& sys, const instance_config& config,
                        const storage_actor& storage) {
  instance x;
  x.name = config.name;
  x.role = config.role;
  if (config.remote) {
    x.controller = config.remote.spawn(sys, config.scheduler.clock);
    scheduler_config sc = config.scheduler;
    if (config.remote.compute) {
      x.compute = spawn_gpu_compute(sys, config.remote.compute);
      config.remote.compute->set_compute_sink(post_to(x.compute));
      sc.gpu_compute = x.compute;
    }
    x.scheduler = spawn_scheduler(sys, sc, x.controller);
    return x;
  }
  controller_stack stack =
    spawn_controller_stack(sys, config.cache, config.controller, config.engine, storage);
  x.engine = stack.engine;
  x.controller = stack.controller;
  scheduler_config sc = config.scheduler;
  sc.engine = x.engine;
  sc.storage = storage;
  sc.role = config.role;
  if (config.engine.gpu) {
    x.compute = spawn_gpu_compute(sys, config.engine.gpu);
    config.engine.gpu->set_compute_sink(post_to(x.compute));
    sc.gpu_compute = x.compute;
  }
  x.scheduler = spawn_scheduler(sys, sc, x.controller);
  return x;
}

void stop_instance(const instance& x) {
  caf::anon_send_exit(x.scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(x.controller, caf::exit_reason::user_shutdown);
  if (x.engine)
    caf::anon_send_exit(x.engine, caf::exit_reason::user_shutdown);
  if (x.compute)
    caf::anon_send_exit(x.compute, caf::exit_reason::user_shutdown);
}

}  // namespace kvtier
