#pragma once

// The call decoder's two readers (decode_call.cpp): the frequent calls' frames read straight from
// their bytes (call_bytes_reader.cpp), and every frame read through msgpack-c's object tree, which
// also words every error. A frame the first reader does not take in full goes to the second, so
// both give one result: tests/serve/codec_readers_test.cpp checks them against each other.

#include <cstddef>
#include <optional>
#include <string>

#include "serve/wire/call.hpp"

namespace kvtier::serve::wire {

/// The keys a map held that the per-verb requirements ask about, beside the fields of `call`.
struct seen_keys {
  std::optional<std::string> op_name;
  bool version_list = false, block_size = false, model = false;
  bool req = false, tokens_count = false, step = false, blocks_count = false;
};

/// Reads a frame of the verbs an engine sends every step (lookup, allocate, wait, probe, step,
/// commit, save, free, preempt, finish, stats, ping) from its bytes, with no object tree.
/// False, with `out` and `seen` in any state, when the frame holds anything else: a key of
/// hello or attach, a key it does not know, a value of another type or width than a client
/// packs (a signed format for an unsigned field), a field the object reader would refuse, or
/// bytes that are not one whole map.
bool read_call_bytes(const char* data, size_t size, call& out, seen_keys& seen);

/// decode_call through msgpack-c's objects alone.
std::optional<wire_error> decode_call_objects(const char* data, size_t size, call& out);

}  // namespace kvtier::serve::wire
