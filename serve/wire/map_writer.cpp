#include "serve/wire/map_writer.hpp"

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

}  // namespace kvtier::serve
