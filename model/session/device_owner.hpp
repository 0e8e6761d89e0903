#pragma once

// Who owns the device tier of an engine beside kvtier (docs/protocol.md): kvtier's controller
// (protocol versions 1 and 2), or the engine's own KV cache manager (version 3: the engine names
// its device block ids, kvtier loads into them).

#include <cstdint>

namespace kvtier::session {

enum class device_owner : uint8_t { kvtier, engine };

}  // namespace kvtier::session
