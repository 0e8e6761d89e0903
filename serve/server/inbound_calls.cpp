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

void decode_inbound(inbound_call& in, uint64_t max_bytes) {
  if (!in.frame)
    return;
  std::shared_ptr<zmq::message_t> frame = std::move(in.frame);
  in = read_call(in.conn, frame->data<char>(), frame->size(), max_bytes, in.since);
}

}  // namespace kvtier::serve
