#include "serve/server/server.hpp"

#include "serve/wire/curve.hpp"

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

// The actors a server runs: its deployment, the storage pool and, per controller stack, one
// instance's cache controller and transfer engine (no scheduler: the engine is the scheduler),
// then a server actor in front of each stack (its shard).
struct served_actors {
  deployment deployed;
  std::vector<caf::actor> shards;  // the server actors, one per stack

  std::vector<cache_controller_actor> controllers() const {
    std::vector<cache_controller_actor> out;
    for (const instance& x : deployed.instances)
      out.push_back(x.controller);
    return out;
  }
  std::vector<transfer_engine_actor> engines() const {
    std::vector<transfer_engine_actor> out;
    for (const instance& x : deployed.instances)
      out.push_back(x.engine);
    return out;
  }
  void stop() const {
    for (const caf::actor& shard : shards)
      caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    stop_deployment(deployed);
  }
  void wait_for(caf::scoped_actor& self) const {
    for (const caf::actor& shard : shards)
      self->wait_for(shard);
    self->wait_for(deployed.storage);
    for (const instance& x : deployed.instances)
      self->wait_for(x.controller, x.engine);
  }
};

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
  const replay_config& rc = p.deployment.run;
  const instance_config& ic = p.deployment.instances.front();
  server_settings ss;
  ss.token = job.token;
  ss.client_timeout_s = p.client_timeout_s;
  ss.max_message_bytes = p.max_message_bytes;
  ss.model = rc.model;
  ss.block_size = rc.block_size;
  ss.shared = shared_config(job.cfg, rc);
  ss.layers = rc.model.layers;
  ss.device_blocks = ic.cache.device_blocks;
  ss.host_blocks = ic.cache.host_blocks;
  ss.storage = ic.controller.storage;
  ss.storage_namespace = rc.storage_namespace;
  ss.max_blocks_per_request = p.deployment.trace.max_blocks_per_request;
  ss.speed = job.speed;
  ss.epoch = sys.clock().now();
  ss.observers = job.observers;
  ss.gpu = p.gpu;
  ss.backend = job.backend;
  ss.verify = job.verify;
  ss.tree_work = ic.controller.tree_work;
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
                     sig.slot, sig.record, std::move(flat));
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

// CURVE on the socket (docs/protocol.md, "Encryption"): keys from the files the job names.
socket_security security_of(const serve_job& job) {
  socket_security security;
  if (!job.curve_key_file.empty())
    security.curve_secret = read_curve_key(job.curve_key_file, "--curve-key-file");
  if (!job.curve_clients_file.empty())
    security.curve_clients = read_curve_key_list(job.curve_clients_file, "--curve-clients-file");
  return security;
}

// Said at start: the public key clients need (never the secret one).
std::string curve_line(const socket_security& security) {
  return "kvtier serve: CURVE on; the server's public key (clients need it): " +
         curve_public_of(security.curve_secret) +
         (security.curve_clients.empty()
            ? std::string("; any client key admitted")
            : "; " + std::to_string(security.curve_clients.size()) + " client keys admitted");
}

// Where each stack's controller reports its blocks: to the KV events, and, when lookups are
// answered off the actor, first to the blocks that stack publishes (off_actor_lookups.hpp),
// which hand them on. Returns the off-actor lookups (null: all on the actor).
std::shared_ptr<off_actor_lookups> wire_block_reports(const serve_job& job, server_plan& plan,
                                                      serve_events& events) {
  std::vector<instance_config>& stacks = plan.deployment.instances;
  std::shared_ptr<off_actor_lookups> off_actor;
  if (plan.lookups == lookup_path::published)
    off_actor = std::make_shared<off_actor_lookups>(
      off_actor_settings{job.token, plan.deployment.run.block_size,
                         plan.deployment.trace.max_blocks_per_request,
                         stacks.front().controller.storage},
      stacks.size(), events.sink());
  for (size_t k = 0; k < stacks.size(); ++k)
    stacks[k].controller.events = off_actor ? off_actor->sink(k) : events.sink();
  return off_actor;
}

// GET /metrics (observe/) over every stack: the tiers' capacities are the stacks' together.
std::unique_ptr<serve_metrics> metrics_of(const serve_job& job, const server_plan& plan,
                                          caf::actor_system& sys, const served_actors& actors,
                                          event_publisher* publisher) {
  uint64_t device = 0, host = 0;
  for (const instance_config& ic : plan.deployment.instances) {
    device += ic.cache.device_blocks;
    host += ic.cache.host_blocks;
  }
  return open_metrics(job, {&sys, actors.controllers(), actors.engines(),
                            actors.deployed.storage, device, host, publisher});
}

}  // namespace

int run_server(const serve_job& job) {
  stop_signals signals;
  server_plan plan = plan_server(job);
  // KV events (observe/): made before the actors, which report to its sink until they end.
  std::unique_ptr<serve_events> events = open_events(job);
  std::shared_ptr<off_actor_lookups> off_actor = wire_block_reports(job, plan, *events);
  caf::actor_system_config cfg;
  // One stack, one worker: a call crosses the server actor, the controller and storage, and on
  // one worker each crossing is a queue push, not a wake-up of another thread (which, with the
  // socket thread's, dominated a call's cost: most of its time went to context switches). A
  // stack per engine runs the stacks' block work side by side (docs/design.md, "Controller
  // stacks").
  configure_wall_clock(cfg, worker_threads(plan));
  caf::actor_system sys{cfg};
  served_actors actors;
  actors.deployed = spawn_deployment(sys, plan.deployment,
                                     sim_clock(sys.clock().now(), job.speed, clock_mode::wall),
                                     nullptr);
  const storage_actor& storage = actors.deployed.storage;
  caf::scoped_actor self{sys};
  try {
    uint64_t rebuilt = rebuild_index(self, storage);
    socket_security security = security_of(job);
    socket_loop loop(job.bind, plan.max_message_bytes, security, plan.io_threads);
    // Made after the actors it reads.
    std::unique_ptr<serve_metrics> metrics =
      metrics_of(job, plan, sys, actors, events->publisher());
    server_settings settings = settings_of(job, plan, sys, metrics.get(), *events);
    settings.off_actor = off_actor;
    settings.refused_connections = loop.refused_connections();
    if (metrics)
      metrics->count_refused_connections(loop.refused_connections());
    if (!security.curve_secret.empty() && job.on_ready)
      job.on_ready(curve_line(security));
    loop.answer_lookups(off_actor);
    auto directory = std::make_shared<engine_directory>(
      static_cast<uint32_t>(plan.deployment.instances.size()));
    actors.shards =
      spawn_server_shards(sys, settings, actors.controllers(), storage, loop.sink(), directory);
    if (plan.gpu)  // real mode runs one stack (server_plan.cpp)
      hook_swap_ins(*plan.gpu, actors.shards.front());
    announce(job, loop.endpoint(), rebuilt, *events, metrics.get());
    int code = loop.run(self, actors.shards, *directory, actors.controllers());
    actors.stop();
    actors.wait_for(self);
    return code;
  } catch (...) {
    actors.stop();
    throw;
  }
}

}  // namespace kvtier::serve
