#pragma once

// Block payloads for runs without a GPU: each stored block's bytes are a pattern derived from its
// block hash (the words --verify writes into real KV blocks, core/pattern_words.hpp), so every
// read can be checked against what must have been written: a lost, stale, foreign or torn block
// shows up as a mismatch, without a device.

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier {

/// `bytes` bytes of the pattern of `hash`.
std::vector<uint8_t> pattern_payload(uint64_t hash, uint64_t bytes);

/// Empty if `payload` is exactly pattern_payload(hash, bytes), else what differs.
std::string check_pattern_payload(uint64_t hash, uint64_t bytes, const std::vector<uint8_t>& payload);
/// The same for `size` bytes at `data`.
std::string check_pattern_payload(uint64_t hash, uint64_t bytes, const uint8_t* data, uint64_t size);

}  // namespace kvtier
