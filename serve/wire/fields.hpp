#pragma once

// The one reader of msgpack fields, for calls and replies alike (docs/protocol.md: every message
// is a map with string keys; integers of any width; a negative value where an unsigned one is
// expected is an error). A value that is missing or of another type than the protocol gives it
// throws field_error, whose text names the field as the `malformed` error reply words it: a
// message that does not fit the protocol is not read on. (The frequent calls are first tried
// straight from their bytes, call_readers.hpp; any error is still worded here.)

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "serve/wire/attach_request.hpp"

namespace kvtier::serve::wire {

struct field_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// -- values: `what` names the field in the error --------------------------------------------------

std::string_view as_key(const msgpack::object& o);
uint64_t as_uint(const msgpack::object& o, std::string_view what);
uint32_t as_u32(const msgpack::object& o, std::string_view what);
int32_t as_i32(const msgpack::object& o, std::string_view what);
int64_t as_i64(const msgpack::object& o, std::string_view what);
double as_f64(const msgpack::object& o, std::string_view what);
bool as_bool(const msgpack::object& o, std::string_view what);
std::string as_str(const msgpack::object& o, std::string_view what);
const msgpack::object_array& as_array(const msgpack::object& o, std::string_view what);
const msgpack::object_map& as_map(const msgpack::object& o, std::string_view what);
std::vector<uint64_t> as_uints(const msgpack::object& o, std::string_view what);
std::vector<uint32_t> as_u32s(const msgpack::object& o, std::string_view what);
std::vector<int64_t> as_i64s(const msgpack::object& o, std::string_view what);
std::vector<double> as_f64s(const msgpack::object& o, std::string_view what);
/// A CUDA IPC handle: binary of ipc_handle_size bytes.
ipc_bytes as_handle(const msgpack::object& o, std::string_view what);

// -- fields of a map, by key ----------------------------------------------------------------------

/// The value under `key`, or null (also when `map` is not a map).
const msgpack::object* find(const msgpack::object& map, std::string_view key);
/// The value under `key`; throws when it is missing.
const msgpack::object& field(const msgpack::object& map, std::string_view key);

uint64_t u64(const msgpack::object& map, std::string_view key);
uint32_t u32(const msgpack::object& map, std::string_view key);
int64_t i64(const msgpack::object& map, std::string_view key);
double f64(const msgpack::object& map, std::string_view key);
bool flag(const msgpack::object& map, std::string_view key);
std::string str(const msgpack::object& map, std::string_view key);
const msgpack::object_array& array(const msgpack::object& map, std::string_view key);
std::vector<uint64_t> u64s(const msgpack::object& map, std::string_view key);
std::vector<uint32_t> u32s(const msgpack::object& map, std::string_view key);
std::vector<int64_t> i64s(const msgpack::object& map, std::string_view key);
std::vector<double> f64s(const msgpack::object& map, std::string_view key);

}  // namespace kvtier::serve::wire
