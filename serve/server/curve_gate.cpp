#include "serve/server/curve_gate.hpp"

#include <algorithm>
#include <array>
#include <chrono>

namespace kvtier::serve {

curve_gate::curve_gate(zmq::context_t& context, const std::vector<std::string>& allowed)
  : socket_(context, zmq::socket_type::rep) {
  for (const std::string& z85 : allowed) {
    std::string key(32, '\0');
    zmq_z85_decode(reinterpret_cast<uint8_t*>(key.data()), z85.c_str());
    allowed_.push_back(std::move(key));
  }
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this] { run(); });
}

curve_gate::~curve_gate() {
  stopping_ = true;
  thread_.join();
}

void curve_gate::run() {
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stopping_) {
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      if (item.revents & ZMQ_POLLIN)
        answer_one();
    } catch (const zmq::error_t&) {
      return;  // the context is going
    }
  }
}

// A ZAP request: version, request id, domain, address, identity, mechanism, credentials (CURVE:
// the client's 32-byte public key). The reply: version, request id, status code and text, user
// id, metadata.
bool curve_gate::answer_one() {
  std::vector<zmq::message_t> frames;
  do {
    frames.emplace_back();
    if (!socket_.recv(frames.back(), zmq::recv_flags::dontwait))
      return false;
  } while (frames.back().more());
  bool known = false;
  if (frames.size() >= 7 && frames[5].to_string_view() == "CURVE") {
    std::string key = frames[6].to_string();
    known = std::find(allowed_.begin(), allowed_.end(), key) != allowed_.end();
  }
  std::string request_id = frames.size() >= 2 ? frames[1].to_string() : std::string();
  std::array<std::string, 6> reply = {"1.0", request_id, known ? "200" : "400",
                                      known ? "OK" : "client key not listed", "", ""};
  for (size_t i = 0; i < reply.size(); ++i)
    socket_.send(zmq::buffer(reply[i]),
                 i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  return true;
}

}  // namespace kvtier::serve
