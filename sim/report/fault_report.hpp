#pragma once

// The summary's account of the storage pool's semantics and of the injected faults
// (docs/outputs.md: `faults`, `storage.pool`), and the end-of-run checks of the pool: nothing
// leased, pending or in flight once a replay has drained, and the index's own invariants.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/storage/storage.hpp"
#include "sim/report/full_result.hpp"

namespace kvtier {

nlohmann::json faults_summary(const full_result& r, const fault_options& faults);
nlohmann::json pool_summary(const full_result& r, const storage_pool_policy& pool);

/// A real backend's failures, one line each for stderr at the end of the run (empty: none):
/// dropped puts (and the backend's reason), puts with no room, blocks lost after a reconnect.
std::vector<std::string> storage_failure_warnings(const storage_report& s);

/// What is wrong with the pool at the end of a drained replay (empty: nothing).
std::vector<std::string> storage_end_problems(const storage_report& s);

}  // namespace kvtier
