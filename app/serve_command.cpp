#include <iostream>

#include "serve/server/server.hpp"
#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "app/validators.hpp"

namespace kvtier {

CLI::App* add_serve_command(CLI::App& app, serve_args& args) {
  auto* cmd = app.add_subcommand(
    "serve", "Run the cache controller, transfer engine and storage pool beside an engine, on "
             "the wall clock, behind a ZeroMQ socket (docs/protocol.md)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--bind", args.bind,
                  "ZeroMQ endpoint to bind (tcp://HOST:PORT, ipc://PATH); an address other "
                  "than loopback needs --token and --curve-key-file")
    ->capture_default_str();
  cmd->add_option("--token", args.token,
                  "a shared secret every request must carry (\"token\"); wrong ones are refused "
                  "and counted");
  cmd->add_option("--curve-key-file", args.curve_key_file,
                  "a file holding the server's CURVE secret key (tools/curve-keys): every "
                  "connection is encrypted and authenticated (ZeroMQ CURVE); clients need the "
                  "public key, which is printed at start");
  cmd->add_option("--curve-clients-file", args.curve_clients_file,
                  "a file of CURVE public keys, one per line: only clients holding one of them "
                  "are let in (refused handshakes are counted: stats refused_connections)");
  cmd->add_option("--speed", args.speed,
                  "virtual seconds per wall second for modelled links and storage media")
    ->check(finite_positive())
    ->capture_default_str();
  cmd->add_option("--events", args.events,
                  "publish KV events (BlockStored/BlockRemoved per tier, vLLM's layout) on a "
                  "ZeroMQ PUB socket bound here, e.g. tcp://127.0.0.1:5558 (docs/events.md)");
  cmd->add_option("--events-replay", args.events_replay,
                  "bind the events' replay socket (ROUTER) here: subscribers ask it for missed "
                  "batches");
  cmd->add_option("--metrics-port", args.metrics_port,
                  "serve GET /metrics (Prometheus text) on this port; 0: a free one, printed "
                  "(docs/metrics.md)")
    ->check(CLI::Range(0, 65535));
  cmd->add_option("--backend", args.backend,
                  "modelled: modelled links; cuda: real copies on the GPU, into the KV tensors "
                  "the engine exports (CUDA IPC; docs/protocol.md, real mode); shm: real copies "
                  "by the CPU, into the KV tensors the engine keeps in shared memory")
    ->check(CLI::IsMember({"modelled", "cuda", "shm"}))
    ->capture_default_str();
  cmd->add_flag("--verify", args.verify,
                "cuda or shm backend: fill every computed block with a pattern of its hash "
                "(engine-sim --verify checks it after every swap-in) and check swap-ins on "
                "arrival");
  cmd->add_option("--metrics-host", args.metrics_host,
                  "address the metrics endpoint listens on; other than loopback needs --token")
    ->capture_default_str();
  return cmd;
}

int run_serve(const serve_args& args) {
  serve::serve_job job;
  job.cfg = load_config(args.config);
  job.bind = args.bind;
  job.token = args.token;
  job.curve_key_file = args.curve_key_file;
  job.curve_clients_file = args.curve_clients_file;
  job.speed = args.speed;
  job.events.endpoint = args.events;
  job.events.replay_endpoint = args.events_replay;
  job.metrics.host = args.metrics_host;
  job.metrics.port = args.metrics_port;
  job.backend = args.backend == "cuda"  ? copy_backend_kind::cuda
                : args.backend == "shm" ? copy_backend_kind::shm
                                        : copy_backend_kind::modelled;
  job.verify = args.verify;
  job.on_ready = [](const std::string& line) { std::cout << line << std::endl; };
  int code = serve::run_server(job);
  std::cout << "kvtier serve: stopped" << std::endl;
  return code;
}

}  // namespace kvtier
