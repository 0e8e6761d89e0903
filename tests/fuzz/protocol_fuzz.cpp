// libFuzzer target for the live controller's message decoder (serve/decode.cpp). The input is
// one frame as a client sends it. An error reply (wire_error) is the one accepted way to refuse;
// a crash, a sanitizer report or an exception escaping is a finding. A frame that decodes is
// checked for the decoder's own promises: one prompt form at most, tokens counts in range.

#include <cstdint>
#include <cstdlib>

#include "serve/wire/call.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier::serve;
  call c;
  auto err = decode_call(reinterpret_cast<const char*>(data), size, c);
  if (err) {
    if (err->message.empty())
      std::abort();  // every refusal names what was wrong
    return 0;
  }
  if (static_cast<int>(c.op) >= verb_count)
    std::abort();
  if (c.text.kind != prompt::form::blocks && c.text.kind != prompt::form::hashes
      && !c.text.blocks.empty())
    std::abort();
  for (const auto& b : c.text.blocks)
    if (c.text.kind == prompt::form::blocks && b.tokens == 0)
      std::abort();
  return 0;
}
