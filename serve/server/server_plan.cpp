#include "serve/server/server_plan.hpp"

#include "actors/transfer_engine/cuda_copies.hpp"
#include "gpu/device_info.hpp"
#include "runtime/config/fault_config.hpp"
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

void check_job(const serve_job& job, const timed_config& t, const replay_config& rc) {
  if (!t.instances.empty())
    throw config_error("cluster.instances: kvtier serve runs one instance (the engine's); "
                       "remove cluster.instances");
  if (resolve_faults(job.cfg, 0, rc.storage_nodes, rc.storage_blocks).any())
    throw config_error("faults.*: faults are deterministic in virtual time only; kvtier serve "
                       "runs on the wall clock");
  if (job.backend != copy_backend_kind::cuda && job.verify)
    throw config_error("--verify checks real bytes: it needs --backend cuda");
  if (job.backend == copy_backend_kind::cuda && !gpu::cuda_built())
    throw config_error("--backend cuda: this kvtier was built without CUDA (configure with "
                       "KVTIER_CUDA=ON on a machine with the CUDA toolkit)");
}

// Real mode: the copies run on the engine's tensors, which come with its hello.
std::shared_ptr<cuda_device> open_gpu(const serve_job& job, const replay_config& rc,
                                      timed_config& t) {
  cuda_device_options o;
  o.shape = rc.model;
  o.block_size = rc.block_size;
  o.device_blocks = rc.cache.device_blocks;
  o.host_blocks = rc.cache.host_blocks;
  o.verify = job.verify;
  o.attach_later = true;
  auto gpu = std::make_shared<cuda_device>(o);
  use_cuda_copies(t.engine, gpu, job.verify ? copy_checks::verify : copy_checks::none);
  // The reply of a step goes before its swap-in lands: the engine waits on IPC events.
  t.controller.grant_early = true;
  t.controller.verify = job.verify;
  return gpu;
}

}  // namespace

server_plan plan_server(const serve_job& job) {
  check_bind(job);
  server_plan p;
  p.replay = resolve(job.cfg);
  p.timed = resolve_timed(job.cfg, p.replay);
  check_job(job, p.timed, p.replay);
  p.client_timeout_s = job.cfg.number(keys::serve::client_timeout_s);
  p.max_message_bytes = static_cast<uint64_t>(job.cfg.integer(keys::serve::max_message_bytes));
  // Without prefix caching nothing matches, as the controller's own lookup answers.
  p.lookups = job.cfg.text(keys::serve::lookups) == "actor" ||
                  p.replay.cache.caching == prefix_caching::off
                ? lookup_path::actor
                : lookup_path::published;  // a checked choice
  if (job.backend == copy_backend_kind::cuda)
    p.gpu = open_gpu(job, p.replay, p.timed);
  prepare_storage(p.timed);
  return p;
}

}  // namespace kvtier::serve
