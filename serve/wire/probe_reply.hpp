#pragma once

// The reply to probe (docs/protocol.md): encoded by the server actor, decoded by the client
// stub. Request ids in it are the engine's.

#include <cstdint>

#include <msgpack.hpp>

#include "model/messages.hpp"

namespace kvtier::serve {

void encode_probe_reply(msgpack::sbuffer& buf, uint64_t id, const probe_reply& r);
probe_reply decode_probe_reply(const msgpack::object& reply);

}  // namespace kvtier::serve
