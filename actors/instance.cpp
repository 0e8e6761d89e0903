#include "actors/instance.hpp"

#include "actors/cache_controller/cache_controller.hpp"

namespace kvtier {

instance spawn_instance(caf::actor_system& sys, const instance_config& config,
                        const storage_actor& storage) {
  instance x;
  x.name = config.name;
  x.engine = spawn_transfer_engine(sys, config.engine, storage);
  scheduler_config sc = config.scheduler;
  if (config.engine.gpu)
    sc.gpu_engine = x.engine;
  x.controller = spawn_cache_controller(sys, config.cache, config.controller, storage, x.engine);
  x.scheduler = spawn_scheduler(sys, sc, x.controller);
  return x;
}

void stop_instance(const instance& x) {
  caf::anon_send_exit(x.scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(x.controller, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(x.engine, caf::exit_reason::user_shutdown);
}

}  // namespace kvtier
