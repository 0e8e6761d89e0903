#include "serve/server/inbound_calls.hpp"

namespace kvtier::serve {

inbound_call read_call(uint64_t conn, const char* data, size_t size, uint64_t max_bytes,
                       std::chrono::steady_clock::time_point since) {
  inbound_call in;
  in.conn = conn;
  in.since = since;
  if (size > max_bytes)
    in.oversize = size;
  else
    in.error = decode_call(data, size, in.c);
  return in;
}

}  // namespace kvtier::serve
