#pragma once

// The readers of a call's field values (docs/protocol.md), shared by the decoder's files. Each
// throws malformed_field with the message the `malformed` reply carries.

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "serve/call.hpp"

namespace kvtier::serve::call_fields {

struct malformed_field : std::exception {
  std::string message;
  explicit malformed_field(std::string m) : message(std::move(m)) {}
};

std::string_view as_key(const msgpack::object& o);
uint64_t as_uint(const msgpack::object& o, std::string_view what);
uint32_t as_u32(const msgpack::object& o, std::string_view what);
int32_t as_i32(const msgpack::object& o, std::string_view what);
std::string as_str(const msgpack::object& o, std::string_view what);
const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what);
std::vector<uint64_t> as_uints(const msgpack::object& o, std::string_view what);
/// `[[req, tokens]]` lists of step and probe calls.
std::vector<token_mark> as_marks(const msgpack::object& o, std::string_view what);
/// `[[req, tokens, [block id]]]`: as as_marks, each entry with an optional third element, the
/// engine's device block ids (version 3), given in `ids` (an empty list where absent).
std::vector<token_mark> as_marks(const msgpack::object& o, std::string_view what,
                                 std::vector<std::vector<uint32_t>>& ids);
/// hello's `model`: every field of model_shape present.
void read_model(const msgpack::object& o, model_shape& m);
/// hello's `tensors`: {device_blocks, layers: [[handle, offset]], event_slots, events: [handle]}.
void read_tensors(const msgpack::object& o, attach_request& t);

}  // namespace kvtier::serve::call_fields
