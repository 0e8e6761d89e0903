#include "storage/payload_pattern.hpp"

#include <cstring>

#include "core/pattern_words.hpp"

namespace kvtier {

namespace {

uint64_t seed_of(uint64_t hash) {
  return mix64(hash ^ 0x5354524f52414745ull);  // "STORAGE": not the KV chunks' seeds
}

}  // namespace

std::vector<uint8_t> pattern_payload(uint64_t hash, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  uint64_t seed = seed_of(hash);
  uint64_t words = bytes / 8;
  for (uint64_t w = 0; w < words; ++w) {
    uint64_t v = pattern_word(seed, w);
    std::memcpy(out.data() + w * 8, &v, 8);
  }
  uint64_t tail = pattern_word(seed, words);
  std::memcpy(out.data() + words * 8, &tail, bytes - words * 8);
  return out;
}

std::string check_pattern_payload(uint64_t hash, uint64_t bytes,
                                  const std::vector<uint8_t>& payload) {
  return check_pattern_payload(hash, bytes, payload.data(), payload.size());
}

std::string check_pattern_payload(uint64_t hash, uint64_t bytes, const uint8_t* data,
                                  uint64_t size) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  if (size != bytes)
    return "verify: storage returned " + std::to_string(size) + " bytes for block " + hex +
           ", which was stored with " + std::to_string(bytes);
  std::vector<uint8_t> want = pattern_payload(hash, bytes);
  if (std::memcmp(want.data(), data, bytes) == 0)
    return {};
  uint64_t at = 0;
  while (want[at] == data[at])
    ++at;
  return "verify: storage block " + std::string(hex) + " differs from what was stored at byte " +
         std::to_string(at);
}

}  // namespace kvtier
