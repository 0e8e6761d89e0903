#include "storage/redis_loop.hpp"

#include <hiredis/sds.h>

#include <string>

namespace kvtier {

// Queues a command on node `n`; false (nothing queued) if the node is down.
bool redis_backend::loop::command(node& n, const std::shared_ptr<batch>& b, uint32_t block,
                                  uint8_t part, std::vector<std::string> words,
                                  const uint8_t* payload, size_t payload_len, size_t payload_at) {
  if (!n.ctx)
    return false;
  queued q{b, block, part, std::move(words), payload, payload_len, payload_at};
  // A delete goes ahead of writes waiting: an evicted block's memory is back before the writes
  // that need it (it was asked after its own write ended, so it never overtakes that).
  if (b->what == op_kind::remove)
    n.waiting.push_front(std::move(q));
  else
    n.waiting.push_back(std::move(q));
  return true;
}

// Hands waiting commands to hiredis while its output buffer has room (see `queued`), once the
// connection is ready (connected, and authenticated where it must be).
void redis_backend::loop::pump(node& n) {
  while (n.ctx && n.connected && !n.waiting.empty() && sdslen(n.ctx->c.obuf) < buffer_limit) {
    queued q = std::move(n.waiting.front());
    n.waiting.pop_front();
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (size_t i = 0; i <= q.words.size(); ++i) {
      if (q.payload && i == q.payload_at) {
        argv.push_back(reinterpret_cast<const char*>(q.payload));
        len.push_back(q.payload_len);
      }
      if (i < q.words.size()) {
        argv.push_back(q.words[i].c_str());
        len.push_back(q.words[i].size());
      }
    }
    auto* to = new reply_to{this, q.b, q.block, q.part, &n};
    if (redisAsyncCommandArgv(n.ctx, on_reply, to, static_cast<int>(argv.size()), argv.data(),
                              len.data()) != REDIS_OK) {
      delete to;
      settle_unsent(n, q);
      continue;
    }
    if (n.pending++ == 0)
      n.last_progress = now_ns();
  }
  // A node that went down with commands still waiting: they fail.
  while (!n.ctx && !n.waiting.empty()) {
    queued q = std::move(n.waiting.front());
    n.waiting.pop_front();
    settle_unsent(n, q);
  }
}

void redis_backend::loop::settle_unsent(node& n, queued& q) {
  reply_to to{this, q.b, q.block, q.part, &n};
  ++n.pending;  // settle() counts it back
  settle(to, nullptr);
}

// A part left by a rolled-back put, deleted before the put answers (its reply is one more the
// batch waits for, `rollback_part`): a failed put's block is gone once the pool frees its room,
// so the node never holds more than the pool counts (docs/design.md "Capacity"). If the node is
// gone meanwhile, the part stays there alone: never a block (both parts are asked for),
// overwritten by the block's next put.
void redis_backend::loop::del_part(node& n, const std::shared_ptr<batch>& b, uint32_t block,
                                   int part) {
  if (!n.ctx)
    return;
  std::string key = block_name(options.ns, b->blocks[block].hash) + part_suffix[part];
  const char* argv[2] = {"DEL", key.c_str()};
  size_t len[2] = {3, key.size()};
  auto* to = new reply_to{this, b, block, rollback_part, &n};
  if (redisAsyncCommandArgv(n.ctx, on_reply, to, 2, argv, len) != REDIS_OK) {
    delete to;
    return;
  }
  ++b->remaining;
  if (n.pending++ == 0)
    n.last_progress = now_ns();
}

// Issues a batch's commands (all of them before the loop's next write: one pipeline per node).
void redis_backend::loop::dispatch(const std::shared_ptr<batch>& bp) {
  batch& b = *bp;
  size_t n_blocks = b.blocks.size();
  b.started_ns = now_ns();
  b.present.assign(n_blocks, false);
  b.parts_ok.assign(n_blocks, 0);
  b.parts_done.assign(n_blocks, 0);
  size_t issued = 0;
  b.remaining = 1;  // held until every command is out, so no reply answers early
  std::string ttl = std::to_string(options.redis_ttl_s);
  for (uint32_t i = 0; i < n_blocks; ++i) {
    node& n = *nodes[node_of_key(b.blocks[i].key, static_cast<uint32_t>(nodes.size()))];
    std::string name = block_name(options.ns, b.blocks[i].hash);
    std::string k = name + part_suffix[0], v = name + part_suffix[1];
    auto one = [&](const char* verb) {
      ++b.remaining;
      if (command(n, bp, i, 0, {verb, k, v}))
        ++issued;
      else
        --b.remaining;
    };
    switch (b.what) {
      case op_kind::exists:
        one("EXISTS");
        break;
      case op_kind::get:
        one("MGET");
        break;
      case op_kind::remove:
        one("DEL");
        break;
      case op_kind::put: {
        const block_bytes_t& p = b.payloads[i];
        size_t half = p.size() / 2;
        for (uint8_t part = 0; part < 2; ++part) {
          std::vector<std::string> words = {"SET", part == 0 ? k : v};
          if (options.redis_ttl_s > 0)
            words.insert(words.end(), {"EX", ttl});
          ++b.remaining;
          if (command(n, bp, i, part, std::move(words), p.data() + (part ? half : 0),
                      part ? p.size() - half : half, 2)) {
            ++issued;
          } else {
            --b.remaining;
            ++b.parts_done[i];
            note_put_error(nullptr, n);
          }
        }
        break;
      }
    }
  }
  (void)issued;
  if (--b.remaining == 0)
    answer(bp);
}

}  // namespace kvtier
