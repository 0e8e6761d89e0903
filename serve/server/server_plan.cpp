#include "serve/server/server_plan.hpp"

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

}  // namespace

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
  const deployment_plan& d = p.deployment;
  p.client_timeout_s = job.cfg.number(keys::serve::client_timeout_s);
  p.max_message_bytes = static_cast<uint64_t>(job.cfg.integer(keys::serve::max_message_bytes));
  // Without prefix caching nothing matches, as the controller's own lookup answers.
  p.lookups = job.cfg.text(keys::serve::lookups) == "actor" ||
                  d.run.cache.caching == prefix_caching::off
                ? lookup_path::actor
                : lookup_path::published;  // a checked choice
  // Real mode: the copies run on the engine's tensors, which come with its hello or `attach`:
  // on its GPU (cuda), or in shared memory, copied by the CPU (shm).
  p.gpu = prepare_gpu(p.deployment);
  prepare_storage(p.deployment);
  return p;
}

}  // namespace kvtier::serve
