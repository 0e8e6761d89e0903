#include "serve/server/server.hpp"

#include "serve/wire/curve.hpp"

#include "actors/instance.hpp"
#include "actors/storage/storage.hpp"
#include "runtime/deployment.hpp"
#include "serve/server/observe_wiring.hpp"
#include "serve/server/off_actor_lookups.hpp"
#include "serve/server/server_actor.hpp"
#include "serve/server/server_plan.hpp"
#include "serve/server/socket_loop.hpp"
#include "serve/server/stop_signals.hpp"

namespace kvtier::serve {

bool is_local_endpoint(const std::string& e) {
  if (e.rfind("ipc://", 0) == 0 || e.rfind("inproc://", 0) == 0)
    return true;
  for (const char* p : {"tcp://127.0.0.1:", "tcp://localhost:", "tcp://[::1]:"})
    if (e.rfind(p, 0) == 0)
      return true;
  return false;
}

namespace {

// The actors a server runs: the storage pool and one instance's controller stack (no scheduler:
// the engine is the scheduler), then the server actor in front of them.
struct served_actors {
  storage_actor storage;
  controller_stack stack;
  caf::actor server;

  void stop() const {
    if (server)
      caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(stack.controller, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(stack.engine, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
  }
};

served_actors spawn_served(caf::actor_system& sys, timed_config& t, double speed) {
  sim_clock clock(sys.clock().now(), speed, clock_mode::wall);
  t.storage.clock = clock;
  t.engine.clock = clock;
  served_actors a;
  a.storage = spawn_storage(sys, t.storage);
  t.storage.backend.reset();
  a.stack = spawn_controller_stack(sys, t.cache, t.controller, t.engine, a.storage);
  return a;
}

// A restarted pool: index what the backend still holds, before any call is taken.
uint64_t rebuild_index(caf::scoped_actor& self, const storage_actor& storage) {
  uint64_t rebuilt = 0;
  self->request(storage, caf::infinite, rebuild_atom_v)
    .receive([&](uint64_t n) { rebuilt = n; },
             [&](const caf::error& e) {
               throw std::runtime_error("storage rebuild failed: " + caf::to_string(e));
             });
  return rebuilt;
}

server_settings settings_of(const serve_job& job, const server_plan& p, caf::actor_system& sys,
                            serve_metrics* metrics, serve_events& events) {
  const replay_config& rc = p.replay;
  server_settings ss;
  ss.token = job.token;
  ss.client_timeout_s = p.client_timeout_s;
  ss.max_message_bytes = p.max_message_bytes;
  ss.model = rc.model;
  ss.block_size = rc.block_size;
  ss.layers = rc.model.layers;
  ss.device_blocks = p.timed.cache.device_blocks;
  ss.host_blocks = p.timed.cache.host_blocks;
  ss.storage = p.timed.controller.storage;
  ss.storage_namespace = rc.storage_namespace;
  ss.max_blocks_per_request =
    static_cast<uint64_t>(job.cfg.integer(keys::trace::max_blocks_per_request));
  ss.speed = job.speed;
  ss.epoch = sys.clock().now();
  ss.observers = job.observers;
  ss.gpu = p.gpu;
  ss.verify = job.verify;
  ss.origins = events.origins();
  if (metrics)
    ss.observers.push_back(metrics->observer());
  return ss;
}

// Real mode: a swap-in submitted on the device (its slot's IPC events recorded) is a message
// to the server actor, which holds the step's reply until then. Held weakly: one after
// shutdown goes nowhere.
void hook_swap_ins(cuda_device& gpu, const caf::actor& server) {
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(server);
  gpu.set_swap_in_hook([weak](swap_in_signal sig) {
    std::vector<uint64_t> flat;
    flat.reserve(2 * sig.blocks.size());
    for (const gpu::block_pattern& b : sig.blocks) {
      flat.push_back(b.block);
      flat.push_back(b.hash);
    }
    if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak))
      caf::anon_send(caf::actor_cast<caf::actor>(strong), gpu_done_atom_v, sig.transfer,
                     sig.slot, std::move(flat));
  });
}

void announce(const serve_job& job, const std::string& bound, uint64_t rebuilt,
              const serve_events& events, const serve_metrics* metrics) {
  if (!job.on_ready)
    return;
  job.on_ready("kvtier serve: listening on " + bound + " (protocol " +
               std::to_string(protocol_version) + "; storage index rebuilt: " +
               std::to_string(rebuilt) + " blocks)");
  if (events.on())
    job.on_ready(events.ready_line());
  if (metrics)
    job.on_ready(metrics->ready_line());
}

}  // namespace

int run_server(const serve_job& job) {
  stop_signals signals;
  server_plan plan = plan_server(job);
  // KV events (observe/): made before the actors, which report to its sink until they end.
  std::unique_ptr<serve_events> events = open_events(job);
  plan.timed.controller.events = events->sink();
  // Lookups off the actor read the blocks the controller reports (off_actor_lookups.hpp);
  // the reports go on to the KV events.
  std::shared_ptr<off_actor_lookups> off_actor;
  if (plan.lookups == lookup_path::published) {
    auto max_blocks = static_cast<uint64_t>(job.cfg.integer(keys::trace::max_blocks_per_request));
    off_actor = std::make_shared<off_actor_lookups>(
      off_actor_settings{job.token, plan.replay.block_size, max_blocks,
                         plan.timed.controller.storage},
      events->sink());
    plan.timed.controller.events = off_actor->sink();
  }
  caf::actor_system_config cfg;
  // One worker: a call crosses the server actor, the controller and storage, and on one worker
  // each crossing is a queue push, not a wake-up of another thread (which, with the socket
  // thread's, dominated a call's cost: most of its time went to context switches).
  configure_wall_clock(cfg, 1);
  caf::actor_system sys{cfg};
  served_actors actors = spawn_served(sys, plan.timed, job.speed);
  caf::scoped_actor self{sys};
  try {
    uint64_t rebuilt = rebuild_index(self, actors.storage);
    socket_security security;
    if (!job.curve_key_file.empty())
      security.curve_secret = read_curve_key(job.curve_key_file, "--curve-key-file");
    if (!job.curve_clients_file.empty())
      security.curve_clients = read_curve_key_list(job.curve_clients_file, "--curve-clients-file");
    socket_loop loop(job.bind, plan.max_message_bytes, security);
    // GET /metrics (observe/): made after the actors it reads.
    const timed_config& t = plan.timed;
    std::unique_ptr<serve_metrics> metrics =
      open_metrics(job, {&sys, actors.stack.controller, actors.stack.engine, actors.storage,
                         t.cache.device_blocks, t.cache.host_blocks, events->publisher()});
    server_settings settings = settings_of(job, plan, sys, metrics.get(), *events);
    settings.off_actor = off_actor;
    settings.refused_connections = loop.refused_connections();
    if (metrics)
      metrics->count_refused_connections(loop.refused_connections());
    if (!security.curve_secret.empty() && job.on_ready)
      job.on_ready("kvtier serve: CURVE on; the server's public key (clients need it): " +
                   curve_public_of(security.curve_secret) +
                   (security.curve_clients.empty()
                      ? std::string("; any client key admitted")
                      : "; " + std::to_string(security.curve_clients.size()) +
                          " client keys admitted"));
    loop.answer_lookups(off_actor);
    actors.server = spawn_server_actor(sys, std::move(settings), actors.stack.controller,
                                       actors.storage, loop.sink());
    if (plan.gpu)
      hook_swap_ins(*plan.gpu, actors.server);
    announce(job, loop.endpoint(), rebuilt, *events, metrics.get());
    int code = loop.run(self, actors.server, actors.stack.controller);
    actors.stop();
    self->wait_for(actors.server, actors.stack.controller, actors.stack.engine, actors.storage);
    return code;
  } catch (...) {
    actors.stop();
    throw;
  }
}

}  // namespace kvtier::serve
