#include "serve/encode.hpp"

namespace kvtier::serve {

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
