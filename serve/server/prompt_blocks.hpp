#pragma once

// A call's prompt as the blocks the server's index names (block_names.hpp): shared by the
// verbs on the server actor and the lookups answered off it (off_actor_lookups.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "observe/events/block_origins.hpp"
#include "serve/wire/call.hpp"

namespace kvtier::serve {

/// The prompt's blocks under the server's names, or why it is refused; `origins`, when given,
/// gets each block's engine hash and tokens (those a `tokens` prompt gave), for the events
/// (docs/events.md).
std::optional<std::string> prompt_blocks(const prompt& p, uint32_t block_size,
                                         uint64_t max_blocks, std::vector<cache_block>& out,
                                         std::vector<block_origin>* origins = nullptr);

}  // namespace kvtier::serve
