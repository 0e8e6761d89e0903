#pragma once

// Runs one of the repository's Python scripts (tools/*.py) with Debian's python3, where
// tools/setup installs python3-matplotlib; returns its exit code.

#include <string>
#include <vector>

namespace kvtier {

int run_python_script(const std::string& script, const std::vector<std::string>& args);

}  // namespace kvtier
