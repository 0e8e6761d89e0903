#pragma once

// What every drained full replay must hold at its end, one instance or a cluster: each request
// the front end read has exactly one record, and ends once as finished, rejected or failed, or
// stays unfinished, so that summary.json's `requests` adds up to `trace.requests`
// (docs/outputs.md, "--mode full"). Each broken rule is one message; a sound run gives none.

#include <string>
#include <vector>

#include "sim/report/full_result.hpp"

namespace kvtier {

std::vector<std::string> request_count_problems(const full_result& r);

}  // namespace kvtier
