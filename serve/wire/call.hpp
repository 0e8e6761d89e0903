#pragma once

// One protocol call (docs/protocol.md), both ways: the client stub encodes it, the server decodes
// it. The decoder fills the fields its verb uses and leaves the rest at their defaults; the
// server checks them against its state.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "core/model_shape.hpp"
#include "model/messages/controller.hpp"
#include "serve/wire/attach_request.hpp"

namespace kvtier::serve {

/// The versions the server speaks; hello picks the highest one both sides do. Version 2 adds
/// the real GPU attach: `tensors` in hello, `swap_in` in step replies, `bench_swap`. Version 3
/// is the engine-owned device tier (docs/protocol.md): the engine's block ids in `admits` and
/// `grows`, `load_blocks` in the step reply, the engine's own prefix in `lookup`. `attach`
/// (any version) hands a real server the engine's tensors from a process other than the one
/// that says hello (a vLLM worker).
inline constexpr uint32_t protocol_version = 3;
inline constexpr uint32_t protocol_version_min = 1;
inline constexpr uint32_t attach_version = 2;
inline constexpr uint32_t engine_tier_version = 3;

enum class verb : uint8_t {
  hello, lookup, allocate, wait, probe, step, commit, save, free, preempt, finish, stats, ping,
  bye, bench_swap, attach,
};
inline constexpr int verb_count = 16;

const char* verb_name(verb v);
std::optional<verb> verb_of(std::string_view name);

/// Error kinds, as the reply's `error` names them.
enum class error_kind : uint8_t {
  malformed, unknown_op, too_large, unauthorized, version, model_mismatch, not_registered,
  bad_request, shutting_down, config_mismatch,
};
inline constexpr int error_kind_count = 10;
const char* error_name(error_kind k);
std::optional<error_kind> error_kind_of(std::string_view name);

/// A prompt in one of the three forms of docs/protocol.md (exactly one is present).
struct prompt {
  enum class form : uint8_t { none, tokens, hashes, blocks } kind = form::none;
  std::vector<int32_t> tokens;
  std::vector<uint64_t> extra_keys;
  std::vector<cache_block> blocks;  ///< hashes / blocks forms
};

struct call {
  verb op = verb::ping;
  /// The request named a known op (false: `op` is only the default, and a reply to it is not
  /// counted under any verb).
  bool op_given = false;
  uint64_t id = 0;
  std::optional<std::string> token;
  std::optional<uint64_t> engine;
  // hello
  std::vector<uint64_t> versions;
  std::string name;
  model_shape model;
  uint32_t block_size = 0;
  std::vector<std::string> tiers;
  /// Config values the engine runs with that the server must share, by key, as JSON text
  /// (docs/protocol.md, "hello"); the server refuses any it does not share.
  std::vector<std::pair<std::string, std::string>> config;
  attach_request tensors;  ///< hello, attach
  // bench_swap
  uint32_t blocks = 0;
  uint32_t repeats = 1;
  // lookup, allocate
  prompt text;
  uint32_t computed_tokens = 0;  ///< lookup, version 3: tokens the engine has on its device
  // allocate, wait, commit, save, free, preempt, finish
  uint64_t req = 0;
  uint32_t tokens = 0;
  // probe and step (a shorthand's one entry is the server's to expand: serve/server/)
  kvtier::probe probe;
  /// Version 3 adds the engine's device block ids of each `admits` / `grows` entry, in their
  /// order, in `admit_blocks` / `grow_blocks`: one list per entry, empty where it gave none.
  kvtier::commit step;
  /// Version 3: device block ids whose contents the engine dropped since its last step.
  std::vector<uint64_t> evicted;
};

struct wire_error {
  error_kind kind = error_kind::malformed;
  std::string message;
};

/// Decodes one request frame. On failure `out.id` holds the call id when it could be read, so
/// the error reply can carry it. Never throws; bounded in depth and sizes by the frame itself.
std::optional<wire_error> decode_call(const char* data, size_t size, call& out);

/// Encodes `c` into `buf` (cleared first) as the client stub sends it: op, id, the token and
/// engine when present, then the fields of its verb that decode_call reads back (optional ones
/// only when set: `tiers`, `config`, `tensors`, `extra_keys`, `computed_tokens`, `evicted`; `admits` and
/// `grows` entries with their device block ids when every entry has a list).
void encode_call(msgpack::sbuffer& buf, const call& c);

}  // namespace kvtier::serve
