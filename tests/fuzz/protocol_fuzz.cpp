// libFuzzer target for the live controller's call decoder (serve/wire/decode_call.cpp). The input
// is one frame as a client sends it. An error reply (wire_error) is the one accepted way to
// refuse; a crash, a sanitizer report or an exception escaping is a finding. A frame that decodes
// is checked for the decoder's own promises (one prompt form at most, tokens counts in range)
// and against the encoder: the call it gives, encoded (serve/wire/encode_call.cpp), decodes
// again, to a call that encodes to the same bytes. The decoder reads the frequent calls from their
// bytes and the rest through msgpack-c's objects (serve/wire/call_readers.hpp): the objects alone
// must give the same error, or a call that encodes to the same bytes.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "serve/wire/call.hpp"
#include "serve/wire/call_readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier::serve;
  call c;
  auto err = decode_call(reinterpret_cast<const char*>(data), size, c);
  call by_objects;
  auto objects_err =
    wire::decode_call_objects(reinterpret_cast<const char*>(data), size, by_objects);
  if (err.has_value() != objects_err.has_value())
    std::abort();  // the two readers disagree on whether the frame is a call
  if (err) {
    if (err->message.empty() || err->message != objects_err->message)
      std::abort();  // every refusal names what was wrong, in one wording
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
  msgpack::sbuffer once;
  encode_call(once, c);
  call again;
  if (decode_call(once.data(), once.size(), again))
    std::abort();  // the encoder wrote what the decoder refuses
  msgpack::sbuffer twice;
  encode_call(twice, again);
  if (std::string(once.data(), once.size()) != std::string(twice.data(), twice.size()))
    std::abort();  // a field lost or changed on the way
  msgpack::sbuffer objects_once;
  encode_call(objects_once, by_objects);
  if (std::string(once.data(), once.size())
      != std::string(objects_once.data(), objects_once.size()))
    std::abort();  // the byte reader read another call than the objects did
  return 0;
}
