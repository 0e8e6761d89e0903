#include <iostream>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "runtime/config/replay_config.hpp"

namespace kvtier {

void add_config_options(CLI::App& cmd, config_args& args) {
  cmd.add_option("--config", args.config_file,
                 "JSON config file laid over configs/default.json")
    ->check(CLI::ExistingFile);
  cmd.add_option("--set", args.sets, "override one key: --set cache.block_size=16 (repeatable)");
}

config load_config(const config_args& args, const std::vector<std::string>& under) {
  config c;
  for (const auto& s : under)
    c.set(s);
  if (!args.config_file.empty())
    c.merge_file(args.config_file);
  for (const auto& s : args.sets)
    c.set(s);
  return c;
}

CLI::App* add_config_command(CLI::App& app, config_args& args) {
  auto* cmd = app.add_subcommand(
    "config", "Print the effective config (defaults, --config, --set) and every valid key");
  add_config_options(*cmd, args);
  return cmd;
}

int run_config(const config_args& args) {
  config c = load_config(args);
  resolve(c);  // the same cross-checks a replay makes
  std::cout << c.effective().dump(2) << "\n\nkeys:\n" << valid_keys_text();
  return exit_ok;
}

}  // namespace kvtier
