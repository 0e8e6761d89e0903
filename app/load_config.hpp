#pragma once

#include "app/commands.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

/// Adds --config and --set to a command.
void add_config_options(CLI::App& cmd, config_args& args);
/// Defaults, then `under` (assignments a file or --set may override), then --config, then each
/// --set; throws config_error on bad input.
config load_config(const config_args& args, const std::vector<std::string>& under = {});

}  // namespace kvtier
