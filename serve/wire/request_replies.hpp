#pragma once

// The replies to lookup, allocate and wait (docs/protocol.md): encoded by the server actor,
// decoded by the client stub (serve/remote_controller.hpp). One encoder and one decoder per
// reply, so that the two sides cannot drift apart.

#include <cstdint>
#include <optional>

#include <msgpack.hpp>

#include "model/messages.hpp"

namespace kvtier::serve {

/// lookup: the prefix held per tier, storage's after the device's and host's.
struct lookup_answer {
  prefix_hit hit;
  uint32_t storage_blocks = 0;
  uint64_t storage_tokens = 0;
};

void encode_lookup_reply(msgpack::sbuffer& buf, uint64_t id, const lookup_answer& a);
lookup_answer decode_lookup_reply(const msgpack::object& reply);

/// allocate: `ready` once the request's loads have landed (or there were none); none while
/// storage is asked or loads ("pending"). `ready::req` is not on the wire: the caller knows it.
void encode_allocate_reply(msgpack::sbuffer& buf, uint64_t id, const std::optional<ready>& r);
std::optional<ready> decode_allocate_reply(const msgpack::object& reply, request_id req);

/// wait: answered once the request's loads have landed.
void encode_wait_reply(msgpack::sbuffer& buf, uint64_t id, const ready& r);
ready decode_wait_reply(const msgpack::object& reply, request_id req);

}  // namespace kvtier::serve
