#include "serve/server/off_actor_lookups.hpp"

#include "serve/wire/curve.hpp"

#include "serve/server/prompt_blocks.hpp"
#include "serve/wire/request_replies.hpp"

namespace kvtier::serve {

off_actor_lookups::off_actor_lookups(off_actor_settings s, size_t stacks, block_event_sink* next)
  : settings_(std::move(s)) {
  for (size_t k = 0; k < stacks; ++k)
    blocks_.emplace_back(next);
}

void off_actor_lookups::engine_registered(uint64_t engine, uint64_t conn, uint32_t version,
                                          uint32_t stack) {
  std::lock_guard<std::mutex> guard(engines_mutex_);
  engines_[engine] = {conn, version, stack};
}

void off_actor_lookups::engine_dropped(uint64_t engine) {
  std::lock_guard<std::mutex> guard(engines_mutex_);
  engines_.erase(engine);
}

std::optional<std::string> off_actor_lookups::try_answer(const inbound_call& in,
                                                         answered_lookup& record) {
  const call& c = in.c;
  if (in.oversize != 0 || in.error || c.op != verb::lookup || !c.engine)
    return std::nullopt;
  if (!settings_.token.empty() && (!c.token || !same_secret(*c.token, settings_.token)))
    return std::nullopt;
  uint32_t stack = 0;
  {
    std::lock_guard<std::mutex> guard(engines_mutex_);
    auto it = engines_.find(*c.engine);
    if (it == engines_.end() || it->second.conn != in.conn ||
        it->second.version >= engine_tier_version)
      return std::nullopt;
    stack = it->second.stack;
  }
  std::vector<cache_block> blocks;
  if (prompt_blocks(c.text, settings_.block_size, settings_.max_blocks_per_request, blocks))
    return std::nullopt;  // the actor words the refusal
  prefix_hit h = blocks_[stack].match(blocks.data(), blocks.size());
  if (settings_.storage && size_t{h.device_blocks} + h.host_blocks < blocks.size())
    return std::nullopt;  // storage must be asked for the rest
  msgpack::sbuffer buf;
  encode_lookup_reply(buf, c.id, {h, 0, 0});
  record = {*c.engine, in.since, static_cast<uint32_t>(blocks.size()), h.device_blocks,
            h.host_blocks, 0};
  return std::string(buf.data(), buf.size());
}

}  // namespace kvtier::serve
