// libFuzzer target for the config loader. The input is a JSON config file, optionally followed by
// a NUL byte and --set assignments, one per line. The loader applies them as `kvtier replay
// --config F --set ...` does, then resolves the replay's settings and the timed replay's, and
// checks the derived limits (runtime/config/time_limits.hpp). config_error is the one accepted way to
// refuse; anything else is a finding.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/deployment_plan.hpp"
#include "tests/fuzz/memory_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  static kvtier::fuzz::memory_file file;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  size_t nul = all.find('\0');
  std::string_view doc = all.substr(0, nul);
  try {
    config c;
    c.merge_file(file.hold(data, doc.size()));
    if (nul != std::string_view::npos) {
      std::string_view sets = all.substr(nul + 1);
      while (!sets.empty()) {
        size_t eol = sets.find('\n');
        c.set(std::string(sets.substr(0, eol)));
        sets = eol == std::string_view::npos ? std::string_view() : sets.substr(eol + 1);
      }
    }
    resolve(c);
    // A calibration names another file: the fuzzer's paths would read whatever they point at.
    if (c.is_set(keys::links::calibration))
      return 0;
    resolve_plan(c, {});  // the time limits checked, instance by instance
    (void)c.effective().dump();
  } catch (const config_error&) {
  }
  return 0;
}
