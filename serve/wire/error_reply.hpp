#pragma once

// The error reply (docs/protocol.md, "Errors"): {"id", "ok": false, "error": kind, "message"},
// encoded by the server and read by the client stub.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <msgpack.hpp>

namespace kvtier::serve {

/// `text` as valid UTF-8: each byte that is not part of a well-formed UTF-8 sequence becomes the
/// four characters `\xNN`, so that a message quoting what a client sent stays decodable.
std::string escape_invalid_utf8(std::string_view text);

/// {"id": id, "ok": false, "error": kind, "message": text}; the message's invalid UTF-8 escaped.
std::string encode_error(uint64_t id, std::string_view kind, std::string_view message);

/// A reply's refusal: the error kind as the server named it (a newer server may name one this
/// build lacks) and its message.
struct refusal_answer {
  std::string kind;
  std::string message;
};

/// None when `reply` says ok; its error otherwise. Throws wire::field_error when `ok` (or, for an
/// error, `error` and `message`) is missing or mistyped.
std::optional<refusal_answer> decode_error(const msgpack::object& reply);

}  // namespace kvtier::serve
