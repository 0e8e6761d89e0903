#pragma once

// What every actor message names: requests by id, blocks by chained hash (core/block_hash.hpp),
// trace requests as read (core/trace_request.hpp).

#include <cstdint>

#include "core/block_hash.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

using request_id = uint64_t;

}  // namespace kvtier
