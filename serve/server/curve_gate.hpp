#pragma once

// Which CURVE clients `kvtier serve` lets in (--curve-clients-file): a ZAP handler
// (ZeroMQ's authentication protocol, RFC 27) on the server's context. libzmq asks it about every
// CURVE handshake, with the client's public key; a key not on the list is refused, and the
// handshake fails (counted by the socket loop's monitor). Without a list no handler runs, and any
// client that knows the server's public key completes the handshake (the token then decides).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

namespace kvtier::serve {

class curve_gate {
 public:
  /// Binds the ZAP endpoint on `context` now (before any CURVE socket binds); `allowed` holds
  /// Z85 public keys.
  curve_gate(zmq::context_t& context, const std::vector<std::string>& allowed);
  ~curve_gate();
  curve_gate(const curve_gate&) = delete;
  curve_gate& operator=(const curve_gate&) = delete;

 private:
  void run();
  bool answer_one();

  zmq::socket_t socket_;
  std::vector<std::string> allowed_;  // binary, 32 bytes each
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace kvtier::serve
