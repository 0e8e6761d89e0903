#include "serve/encode.hpp"

namespace kvtier::serve {

void put_blocks(map_writer& w, const std::vector<cache_block>& blocks) {
  auto& pk = w.key("blocks");
  pk.pack_array(static_cast<uint32_t>(blocks.size()));
  for (const cache_block& b : blocks) {
    pk.pack_array(2);
    pk.pack(b.hash);
    pk.pack(b.tokens);
  }
}

map_writer ok_reply(msgpack::sbuffer& buf, uint64_t id, uint32_t fields) {
  map_writer w(buf, fields + 2);
  w.put("id", id);
  w.put("ok", true);
  return w;
}

std::string encode_error(uint64_t id, std::string_view kind, std::string_view message) {
  msgpack::sbuffer buf;
  map_writer w(buf, 4);
  w.put("id", id);
  w.put("ok", false);
  w.put_str("error", kind);
  w.put_str("message", message);
  return std::string(buf.data(), buf.size());
}

}  // namespace kvtier::serve
