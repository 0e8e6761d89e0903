#include "serve/server/server_plan.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "gpu/device_info.hpp"
#include "runtime/deployment.hpp"

namespace kvtier::serve {

namespace {

void check_bind(const serve_job& job) {
  if (!is_local_endpoint(job.bind) && job.token.empty())
    throw config_error("--bind " + job.bind + " is reachable from other machines: give --token "
                       "(every request must then carry it)");
  // Plaintext never leaves the machine: the token and every call would travel in clear.
  if (!is_local_endpoint(job.bind) && job.curve_key_file.empty())
    throw config_error("--bind " + job.bind + " is reachable from other machines: give "
                       "--curve-key-file (the server's CURVE secret key; tools/curve-keys makes "
                       "one): plaintext is served on loopback only");
  if (!job.curve_clients_file.empty() && job.curve_key_file.empty())
    throw config_error("--curve-clients-file needs --curve-key-file (the server's own key)");
  if (job.bind.empty())
    throw config_error("--bind: empty endpoint");
}

void check_backend(const serve_job& job) {
  if (job.backend == copy_backend_kind::modelled && job.verify)
    throw config_error("--verify checks real bytes: it needs --backend cuda or shm");
  if (job.backend == copy_backend_kind::cuda && !gpu::cuda_built())
    throw config_error("--backend cuda: this kvtier was built without CUDA (configure with "
                       "KVTIER_CUDA=ON on a machine with the CUDA toolkit)");
}

// Real mode writes what storage returns into the engine's tensors: a storage tier must hold the
// bytes, or a storage hit would load whatever the host block held before (docs/vllm.md, "The
// data path").
void check_real_storage(const serve_job& job, const deployment_plan& d) {
  if (job.backend == copy_backend_kind::modelled || d.storage.pool.capacity_blocks == 0
      || d.storage.backend.kind != storage_backend_kind::model)
    return;
  throw config_error(std::string("storage.backend=model keeps no bytes, and --backend ")
                     + (job.backend == copy_backend_kind::shm ? "shm" : "cuda")
                     + " loads storage hits into the engine's KV: set storage.backend (memory, "
                       "file, redis, redis_cluster) or storage.capacity_tokens=0");
}

// serve.controller_stacks=per_engine: the one planned instance becomes serve.engine_slots, each
// with the whole device tier (an engine's GPU is its own since protocol version 3) and an equal
// share of the host tier (one node's pinned memory, split so that no lock is shared between the
// stacks' threads; docs/design.md, "Controller stacks").
void plan_stacks(const serve_job& job, server_plan& p) {
  if (job.cfg.text(keys::serve::controller_stacks) == "one")
    return;
  p.stacks = controller_stacks::per_engine;  // a checked choice
  if (job.backend != copy_backend_kind::modelled)
    throw config_error("serve.controller_stacks=per_engine runs modelled copies only (real mode "
                       "attaches one engine's tensors to one device): use "
                       "serve.controller_stacks=one with --backend cuda or shm");
  if (!job.events.endpoint.empty())
    throw config_error("serve.controller_stacks=per_engine: --events publishes one stack's "
                       "blocks only: use serve.controller_stacks=one with --events");
  const auto slots = static_cast<uint32_t>(job.cfg.integer(keys::serve::engine_slots));
  instance_config base = p.deployment.instances.front();
  if (base.cache.host_blocks > 0 && base.cache.host_blocks < slots)
    throw config_error("cache.host_tokens gives " + std::to_string(base.cache.host_blocks)
                       + " host blocks, fewer than serve.engine_slots (" + std::to_string(slots)
                       + "): each stack needs a share of at least one block");
  base.cache.host_blocks /= slots;  // the remainder stays unused
  std::vector<instance_config>& instances = p.deployment.instances;
  instances.assign(slots, base);
  for (uint32_t k = 0; k < slots; ++k)
    instances[k].name = base.name + "/slot-" + std::to_string(k);
}

}  // namespace

size_t worker_threads(const server_plan& plan) {
  if (plan.stacks == controller_stacks::one)
    return 1;
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)  // taskset narrows it
    cores = static_cast<size_t>(std::max(1, CPU_COUNT(&allowed)));
  // The socket thread and ZeroMQ's I/O thread take most of a core between them (BENCHMARKS.md,
  // "Where a per-engine server's CPU goes"): the workers get the others.
  return std::clamp(plan.stack_count() + 1, size_t{1}, std::max<size_t>(cores, 2) - 1);
}

server_plan plan_server(const serve_job& job) {
  check_bind(job);
  run_choices choices;
  choices.scheduler = scheduling::engine;  // the engine schedules; kvtier runs its controller
  choices.clock = clock_mode::wall;
  choices.backend = job.backend;
  choices.verify = job.verify;
  server_plan p;
  p.deployment = resolve_plan(job.cfg, choices);
  check_backend(job);
  check_real_storage(job, p.deployment);
  const deployment_plan& d = p.deployment;
  p.client_timeout_s = job.cfg.number(keys::serve::client_timeout_s);
  p.max_message_bytes = static_cast<uint64_t>(job.cfg.integer(keys::serve::max_message_bytes));
  p.io_threads = static_cast<int>(job.cfg.integer(keys::serve::io_threads));
  // Without prefix caching nothing matches, as the controller's own lookup answers.
  p.lookups = job.cfg.text(keys::serve::lookups) == "actor" ||
                  d.run.cache.caching == prefix_caching::off
                ? lookup_path::actor
                : lookup_path::published;  // a checked choice
  plan_stacks(job, p);
  // Real mode: the copies run on the engine's tensors, which come with its hello or `attach`:
  // on its GPU (cuda), or in shared memory, copied by the CPU (shm).
  p.gpu = prepare_gpu(p.deployment);
  prepare_storage(p.deployment);
  return p;
}

}  // namespace kvtier::serve
