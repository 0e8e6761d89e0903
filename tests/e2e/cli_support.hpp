#pragma once

// Running the built kvtier binary as users do, for the command-line tests.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace cli_test {

namespace fs = std::filesystem;
using nlohmann::json;

struct outcome {
  int code = -1;
  std::string out;  // stdout and stderr together
};

/// Runs `kvtier ARGS` through the shell (so ARGS may hold redirections and pipes before it:
/// use shell_run for a whole command line).
inline outcome shell_run(const std::string& command_line) {
  std::string cmd = command_line + " 2>&1";
  outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
    o.out.append(buf, n);
  int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

inline const std::string binary = KVTIER_BINARY;

inline outcome kvtier(const std::string& args) {
  return shell_run(binary + " " + args);
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh path in the temp folder (removed if it exists), unique to this process.
inline fs::path scratch(const std::string& name) {
  fs::path dir =
    fs::temp_directory_path() / ("kvtier-cli-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

inline const std::string data = std::string(KVTIER_TEST_DATA);
inline const std::string shared = std::string(KVTIER_SHARED_DIR) + "/traces/mooncake/";

inline json summary_of(const fs::path& dir) {
  return json::parse(slurp(dir / "summary.json"));
}

}  // namespace cli_test
