#pragma once

// Writing a message (docs/protocol.md): a msgpack map with string keys, calls and replies alike.

#include <cstdint>
#include <exception>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "core/block_hash.hpp"
#include "core/check.hpp"

namespace kvtier::serve {

/// A msgpack map written in one pass; the caller states how many entries it will write, and
/// writes exactly that many keys (checked when the writer goes: a map that announces another
/// count than it holds would be read as garbage on the other side).
class map_writer {
 public:
  map_writer(msgpack::sbuffer& buf, uint32_t entries)
    : buf_(buf), pk_(buf), entries_(entries) {
    pk_.pack_map(entries);
  }
  // The packer only points at the buffer: a moved writer goes on writing the same map.
  map_writer(map_writer&& other) noexcept
    : buf_(other.buf_), pk_(other.buf_), entries_(other.entries_), keys_(other.keys_) {
    other.moved_ = true;
  }
  map_writer(const map_writer&) = delete;
  map_writer& operator=(const map_writer&) = delete;
  map_writer& operator=(map_writer&&) = delete;
  ~map_writer() { KVTIER_ASSERT(moved_ || keys_ == entries_ || std::uncaught_exceptions() > 0); }

  msgpack::packer<msgpack::sbuffer>& key(std::string_view k) {
    KVTIER_ASSERT(keys_ < entries_);
    ++keys_;
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
  uint32_t entries_ = 0;
  uint32_t keys_ = 0;
  bool moved_ = false;
};

/// "blocks": [[hash, tokens], ...], a request's blocks as `lookup` and `allocate` carry them.
void put_blocks(map_writer& w, const std::vector<cache_block>& blocks);

/// Starts {"id": id, "ok": true, + `fields` more}: the caller writes those.
map_writer ok_reply(msgpack::sbuffer& buf, uint64_t id, uint32_t fields);

}  // namespace kvtier::serve
