#pragma once

// Running the kvtier binary from a test as users run it: exit code and output.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace cli_support {

namespace fs = std::filesystem;

struct outcome {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline outcome kvtier(const std::string& args) {
  std::string cmd = std::string(KVTIER_BINARY) + " " + args + " 2>&1";
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

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh folder name under the temporary directory (removed if it exists).
inline fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kvtier-cli-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

inline nlohmann::json summary_of(const fs::path& dir) {
  return nlohmann::json::parse(slurp(dir / "summary.json"));
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace cli_support
