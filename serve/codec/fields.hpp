#pragma once

// Reading a reply's msgpack map by key (docs/protocol.md: every message is a map with string
// keys). A field that is missing or of another type than the protocol gives it is an error
// (std::runtime_error naming the key): a reply that does not fit the protocol is not read on.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

namespace kvtier::serve::wire {

/// The value under `key`, or null (also when `map` is not a map).
const msgpack::object* find(const msgpack::object& map, std::string_view key);
/// The value under `key`; throws when it is missing.
const msgpack::object& field(const msgpack::object& map, std::string_view key);

uint64_t u64(const msgpack::object& map, std::string_view key);
uint32_t u32(const msgpack::object& map, std::string_view key);
int64_t i64(const msgpack::object& map, std::string_view key);
bool flag(const msgpack::object& map, std::string_view key);
std::string str(const msgpack::object& map, std::string_view key);
/// An array field, as the array; throws when it is missing or not an array.
const msgpack::object_array& array(const msgpack::object& map, std::string_view key);

/// The elements of an array of unsigned (or, for i64s, any) integers.
std::vector<uint64_t> u64s(const msgpack::object& map, std::string_view key);
std::vector<uint32_t> u32s(const msgpack::object& map, std::string_view key);
std::vector<int64_t> i64s(const msgpack::object& map, std::string_view key);

}  // namespace kvtier::serve::wire
