#include "serve/wire/error_reply.hpp"

#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

namespace {

// The length of the well-formed UTF-8 sequence at `s[i]` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 where none starts.
size_t utf8_sequence_at(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  if (b < 0x80)
    return 1;
  size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4
                                                                                              : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xc0) != 0x80)
      return 0;
  unsigned char second = byte(i + 1);
  if ((b == 0xe0 && second < 0xa0) || (b == 0xed && second > 0x9f)
      || (b == 0xf0 && second < 0x90) || (b == 0xf4 && second > 0x8f))
    return 0;
  return n;
}

}  // namespace

std::string escape_invalid_utf8(std::string_view text) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (size_t n = utf8_sequence_at(text, i)) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    auto b = static_cast<unsigned char>(text[i++]);
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 0xf];
  }
  return out;
}

std::string encode_error(uint64_t id, std::string_view kind, std::string_view message) {
  msgpack::sbuffer buf;
  map_writer w(buf, 4);
  w.put("id", id);
  w.put("ok", false);
  w.put_str("error", kind);
  w.put_str("message", escape_invalid_utf8(message));
  return std::string(buf.data(), buf.size());
}

std::optional<refusal_answer> decode_error(const msgpack::object& reply) {
  if (wire::flag(reply, "ok"))
    return std::nullopt;
  return refusal_answer{wire::str(reply, "error"), wire::str(reply, "message")};
}

}  // namespace kvtier::serve
