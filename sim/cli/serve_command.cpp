#include <iostream>

#include "serve/server.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/load_config.hpp"
#include "sim/cli/validators.hpp"

namespace kvtier {

CLI::App* add_serve_command(CLI::App& app, serve_args& args) {
  auto* cmd = app.add_subcommand(
    "serve", "Run the cache controller, transfer engine and storage pool beside an engine, on "
             "the wall clock, behind a ZeroMQ socket (docs/protocol.md)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--bind", args.bind,
                  "ZeroMQ endpoint to bind (tcp://HOST:PORT, ipc://PATH); an address other "
                  "than loopback needs --token")
    ->capture_default_str();
  cmd->add_option("--token", args.token,
                  "a shared secret every request must carry (\"token\"); wrong ones are refused "
                  "and counted");
  cmd->add_option("--speed", args.speed,
                  "virtual seconds per wall second for modelled links and storage media")
    ->check(finite_positive())
    ->capture_default_str();
  return cmd;
}

int run_serve(const serve_args& args) {
  serve::serve_job job;
  job.cfg = load_config(args.config);
  job.bind = args.bind;
  job.token = args.token;
  job.speed = args.speed;
  job.on_ready = [](const std::string& line) { std::cout << line << std::endl; };
  int code = serve::run_server(job);
  std::cout << "kvtier serve: stopped" << std::endl;
  return code;
}

}  // namespace kvtier
