#include "app/python_script.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include <sys/wait.h>
#include <unistd.h>

#include "app/commands.hpp"

namespace kvtier {

int run_python_script(const std::string& script, const std::vector<std::string>& args) {
  // Debian's interpreter: a python3 earlier on PATH (a pyenv shim) may lack matplotlib.
  std::string python =
    std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv_s = {python, source_file(script)};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(python.c_str(), argv.data());
    std::cerr << "kvtier: cannot run python3: " << std::strerror(errno)
              << " (tools/setup installs it)\n";
    ::_exit(1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : exit_failure;
}

}  // namespace kvtier
