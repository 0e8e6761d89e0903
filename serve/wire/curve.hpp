#pragma once

// ZeroMQ CURVE for `kvtier serve`'s sockets (docs/protocol.md, "Encryption"): CurveZMQ
// (Curve25519 keys, every frame encrypted and authenticated) in Debian's libzmq 4.3. The server
// holds a secret key; a client must know the server's public key, so it talks to that server and
// no other, and brings a key pair of its own (made fresh when it has none), which the server may
// require to be on a list (the ZAP handler in serve/server/curve_gate.hpp).
//
// Keys live in files, as ZeroMQ writes them: 40 characters of Z85 on the file's first line
// (`tools/curve-keys` makes a pair). A secret key is never printed; messages name its file.
// A plaintext client of a CURVE socket, or a client with another server key, fails the
// handshake: the server never sees its frames, and counts it (socket_loop's monitor).

#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

namespace kvtier::serve {

/// A key read from the first line of `path`: 40 characters of Z85 (a 32-byte key). Throws
/// config_error naming `option` and the file (never the key) when it is not one.
std::string read_curve_key(const std::string& path, const char* option);

/// The public keys listed in `path`, one per line (blank lines and `#` comments skipped).
std::vector<std::string> read_curve_key_list(const std::string& path, const char* option);

/// The public key of a secret key (both Z85).
std::string curve_public_of(const std::string& secret);

/// What a client needs: the server's public key, and its own pair (empty: made fresh).
struct curve_client_keys {
  std::string server_public;
  std::string public_key;
  std::string secret_key;
  bool on() const { return !server_public.empty(); }
};

/// Reads a client's keys from files: the server's public key, and optionally its own secret key
/// (its public key derived). Throws config_error naming the option.
curve_client_keys read_curve_client_keys(const std::string& server_key_file,
                                         const std::string& client_key_file,
                                         const char* server_option, const char* client_option);

/// Makes `socket` a CURVE client of the server whose public key `keys` holds (before connect).
void make_curve_client(zmq::socket_t& socket, const curve_client_keys& keys);

/// Makes `socket` a CURVE server with `secret` (before bind).
void make_curve_server(zmq::socket_t& socket, const std::string& secret);

/// Whether `given` equals `expected`, in time that depends on `expected`'s length only (a token
/// compared byte by byte up to the first difference would tell an attacker how much is right).
bool same_secret(std::string_view given, std::string_view expected);

}  // namespace kvtier::serve
