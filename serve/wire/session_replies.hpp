#pragma once

// The replies to hello, ping, bye and bench_swap (docs/protocol.md): encoded by the server actor,
// decoded by the client stub.

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "core/build_info.hpp"
#include "gpu/kv_cache.hpp"
#include "model/session/device_owner.hpp"

namespace kvtier::serve {

struct hello_answer {
  uint32_t version = 1;  ///< the one chosen
  bool attached = false;  ///< version 2 and up: copies run on this engine's tensors
  bool verify = false;    ///< version 2 and up: computed blocks get their pattern
  /// On the wire from version 3 (always `engine` there); kvtier's below.
  session::device_owner owner = session::device_owner::kvtier;
  uint64_t engine = 0;
  uint32_t block_size = 0;
  uint32_t layers = 0;
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  std::vector<std::string> tiers;
  int64_t now_ns = 0;
  double speed = 1.0;
  build_info kvtier;  ///< the server's build
};

void encode_hello_reply(msgpack::sbuffer& buf, uint64_t id, const hello_answer& a);
hello_answer decode_hello_reply(const msgpack::object& reply);

/// ping: the server's clock.
void encode_ping_reply(msgpack::sbuffer& buf, uint64_t id, int64_t now_ns);
int64_t decode_ping_reply(const msgpack::object& reply);

/// bye: the engine's requests released.
void encode_bye_reply(msgpack::sbuffer& buf, uint64_t id, uint64_t released);
uint64_t decode_bye_reply(const msgpack::object& reply);

/// bench_swap (real mode): bytes per repeat, GB/s per repeat, the event slot of the last repeat,
/// the layers, and [[device block, pattern key]] loaded.
struct bench_swap_answer {
  uint64_t bytes = 0;
  std::vector<double> gbps;
  uint32_t slot = 0;
  uint32_t layers = 0;
  std::vector<gpu::block_pattern> blocks;
};

void encode_bench_swap_reply(msgpack::sbuffer& buf, uint64_t id, const bench_swap_answer& a);
bench_swap_answer decode_bench_swap_reply(const msgpack::object& reply);

}  // namespace kvtier::serve
