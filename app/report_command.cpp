#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "app/commands.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

CLI::App* add_report_command(CLI::App& app, report_args& args) {
  auto* cmd = app.add_subcommand(
    "report", "Turn a sweep folder into report.md with comparison tables and plots (PNG, SVG)");
  cmd->add_option("dir", args.dir, "the sweep's folder (holding results.csv)")->required();
  cmd->add_option("--title", args.title, "the report's title");
  return cmd;
}

int run_report(const report_args& args) {
  if (!std::filesystem::exists(args.dir + "/results.csv"))
    throw config_error(args.dir + "/results.csv: no sweep results here (run kvtier sweep first)");
  std::string script = source_file("tools/sweep_report.py");
  // Debian's interpreter, where tools/setup installs python3-matplotlib (a python3 earlier on
  // PATH, such as a pyenv shim, may lack it).
  std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv_s = {python, script, args.dir};
  if (!args.title.empty()) {
    argv_s.push_back("--title");
    argv_s.push_back(args.title);
  }
  pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(python.c_str(), argv.data());
    std::cerr << "kvtier report: cannot run python3: " << std::strerror(errno)
              << " (tools/setup installs it)\n";
    ::_exit(1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status))
    return exit_failure;
  return WEXITSTATUS(status);
}

}  // namespace kvtier
