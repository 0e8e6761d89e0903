#include "serve/wire/curve.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "runtime/config/options.hpp"

namespace kvtier::serve {

namespace {

std::string trimmed(std::string line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  size_t start = line.find_first_not_of(" \t");
  return start == std::string::npos ? std::string() : line.substr(start);
}

bool is_z85_key(const std::string& text) {
  uint8_t bytes[32];
  return text.size() == 40 && zmq_z85_decode(bytes, text.c_str()) != nullptr;
}

}  // namespace

std::string read_curve_key(const std::string& path, const char* option) {
  std::ifstream in(path);
  if (!in)
    throw config_error(std::string(option) + ": cannot read '" + path + "': " +
                       std::strerror(errno));
  std::string line;
  std::getline(in, line);
  line = trimmed(line);
  if (!is_z85_key(line))
    throw config_error(std::string(option) + ": '" + path + "' does not start with a CURVE key "
                       "(40 characters of Z85 on its first line, as tools/curve-keys writes)");
  return line;
}

std::vector<std::string> read_curve_key_list(const std::string& path, const char* option) {
  std::ifstream in(path);
  if (!in)
    throw config_error(std::string(option) + ": cannot read '" + path + "': " +
                       std::strerror(errno));
  std::vector<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trimmed(line);
    if (line.empty() || line[0] == '#')
      continue;
    if (!is_z85_key(line))
      throw config_error(std::string(option) + ": '" + path + "' line " + std::to_string(n) +
                         ": not a CURVE public key (40 characters of Z85)");
    keys.push_back(line);
  }
  if (keys.empty())
    throw config_error(std::string(option) + ": '" + path + "' lists no key");
  return keys;
}

std::string curve_public_of(const std::string& secret) {
  char pub[41] = {};
  if (zmq_curve_public(pub, secret.c_str()) != 0)
    throw config_error("a CURVE secret key that libzmq cannot use (built without CURVE?)");
  return pub;
}

curve_client_keys read_curve_client_keys(const std::string& server_key_file,
                                         const std::string& client_key_file,
                                         const char* server_option, const char* client_option) {
  curve_client_keys k;
  if (server_key_file.empty()) {
    if (!client_key_file.empty())
      throw config_error(std::string(client_option) + " needs " + server_option +
                         " (the server's public key: whom to talk to)");
    return k;
  }
  k.server_public = read_curve_key(server_key_file, server_option);
  if (!client_key_file.empty()) {
    k.secret_key = read_curve_key(client_key_file, client_option);
    k.public_key = curve_public_of(k.secret_key);
  }
  return k;
}

void make_curve_client(zmq::socket_t& socket, const curve_client_keys& keys) {
  std::string pub = keys.public_key, sec = keys.secret_key;
  if (sec.empty()) {  // a key pair of its own, for this connection only
    char p[41] = {}, s[41] = {};
    if (zmq_curve_keypair(p, s) != 0)
      throw config_error("this libzmq has no CURVE (zmq_curve_keypair failed)");
    pub = p;
    sec = s;
  }
  socket.set(zmq::sockopt::curve_serverkey, keys.server_public);
  socket.set(zmq::sockopt::curve_publickey, pub);
  socket.set(zmq::sockopt::curve_secretkey, sec);
}

void make_curve_server(zmq::socket_t& socket, const std::string& secret) {
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, secret);
}

bool same_secret(std::string_view given, std::string_view expected) {
  volatile unsigned char diff = given.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

}  // namespace kvtier::serve
