#pragma once

// Reply and request encoding (docs/protocol.md): msgpack maps with string keys.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "core/block_hash.hpp"

namespace kvtier::serve {

/// A msgpack map written in one pass; the caller states how many entries it will write.
class map_writer {
 public:
  map_writer(msgpack::sbuffer& buf, uint32_t entries) : buf_(buf), pk_(buf) {
    pk_.pack_map(entries);
  }
  // The packer only points at the buffer: a moved writer goes on writing the same map.
  map_writer(map_writer&& other) noexcept : buf_(other.buf_), pk_(other.buf_) {}
  msgpack::packer<msgpack::sbuffer>& key(std::string_view k) {
    pk_.pack_str(static_cast<uint32_t>(k.size()));
    pk_.pack_str_body(k.data(), static_cast<uint32_t>(k.size()));
    return pk_;
  }
  template <class T>
  void put(std::string_view k, const T& v) { key(k).pack(v); }
  void put_str(std::string_view k, std::string_view v) {
    key(k);
    pk_.pack_str(static_cast<uint32_t>(v.size()));
    pk_.pack_str_body(v.data(), static_cast<uint32_t>(v.size()));
  }
  msgpack::packer<msgpack::sbuffer>& packer() { return pk_; }
  msgpack::sbuffer& buffer() { return buf_; }

 private:
  msgpack::sbuffer& buf_;
  msgpack::packer<msgpack::sbuffer> pk_;
};

/// "blocks": [[hash, tokens], ...], a request's blocks as `lookup` and `allocate` carry them.
void put_blocks(map_writer& w, const std::vector<cache_block>& blocks);

/// Starts {"id": id, "ok": true, + `fields` more}: the caller writes those.
map_writer ok_reply(msgpack::sbuffer& buf, uint64_t id, uint32_t fields);

/// `text` as valid UTF-8: each byte that is not part of a well-formed UTF-8 sequence becomes the
/// four characters `\xNN`, so that a message quoting what a client sent stays decodable.
std::string escape_invalid_utf8(std::string_view text);

/// {"id": id, "ok": false, "error": kind, "message": text}; the message's invalid UTF-8 escaped.
std::string encode_error(uint64_t id, std::string_view kind, std::string_view message);

}  // namespace kvtier::serve
