#pragma once

// The identity of this build: which kvtier, from which commit, built how. Every output that
// carries results names it (summary.json's `kvtier`, a sweep's plan and cell ids, serve's
// `hello`, the `kvtier_build_info` metric; docs/outputs.md, "Provenance"), so a figure can be
// traced to the code that produced it.

#include <string>

namespace kvtier {

struct build_info {
  std::string version;     // the project version of CMakeLists.txt
  std::string commit;      // git's short HEAD, "-dirty" with tracked changes; "unknown" outside git
  std::string build_type;  // CMAKE_BUILD_TYPE
  std::string compiler;    // C++ compiler id and version
  std::string cuda;        // the CUDA compiler's version, or "none" without the CUDA backend
};

const build_info& this_build();

// "kvtier 0.1.0 (commit abc, Release, GNU 12.2.0, CUDA none)": one line for humans.
std::string build_line(const build_info& b = this_build());

// "0.1.0+abc": what a sweep's cell ids and plan are keyed by.
std::string build_id(const build_info& b = this_build());

}  // namespace kvtier
