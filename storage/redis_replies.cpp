#include "storage/redis_loop.hpp"

#include <cstring>

namespace kvtier {

void redis_backend::loop::on_reply(redisAsyncContext*, void* r, void* priv) {
  auto* to = static_cast<reply_to*>(priv);
  to->owner->settle(*to, static_cast<redisReply*>(r));
  delete to;
}

// An MGET of a block's two parts: whether both came and fill the block's span exactly. The
// parts are copied in here unless the reader already wrote them there (reply_into).
bool redis_backend::loop::landed_whole(redisReply* r, block_span into) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
    return false;
  redisReply* k = r->element[0];
  redisReply* v = r->element[1];
  if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
    return false;
  if (k->len + v->len != into.size) {
    ++corrupt;
    return false;
  }
  if (k->str)
    std::memcpy(into.data, k->str, k->len);
  if (v->str)
    std::memcpy(into.data + k->len, v->str, v->len);
  return true;
}

// Keeps the first failed put's reason: Redis's own words (an OOM refusal), or the node's state.
void redis_backend::loop::note_put_error(redisReply* r, const node& n) {
  std::lock_guard<std::mutex> guard(error_mutex);
  if (!put_error.empty())
    return;
  std::string where = "redis " + n.host + ":" + std::to_string(n.port) + ": ";
  if (!r)
    put_error = where + "not reachable";
  else if (r->type == REDIS_REPLY_ERROR && r->str)
    put_error = where + std::string(r->str, r->len);
  else
    put_error = where + "unexpected reply to SET";
}

void redis_backend::loop::settle(reply_to& to, redisReply* r) {
  batch& b = *to.b;
  if (to.n->pending > 0)
    --to.n->pending;
  to.n->last_progress = now_ns();
  switch (b.what) {
    case op_kind::exists:
      b.present[to.block] = r && r->type == REDIS_REPLY_INTEGER && r->integer == 2;
      break;
    case op_kind::get:
      b.present[to.block] = r && landed_whole(r, b.into[to.block]);
      break;
    case op_kind::put: {
      if (to.part == rollback_part)
        break;  // the batch waited for the delete; nothing to count
      bool ok = r && r->type == REDIS_REPLY_STATUS;
      if (!ok)
        note_put_error(r, *to.n);
      if (ok)
        b.parts_ok[to.block] |= static_cast<uint8_t>(1u << to.part);
      uint8_t landed = b.parts_ok[to.block];
      if (++b.parts_done[to.block] == 2 && (landed == 1 || landed == 2)) {
        // One part landed, the other did not: take the landed one back so that the block is
        // absent, not half there.
        ++rollbacks;
        del_part(*to.n, to.b, to.block, landed == 1 ? 0 : 1);
      }
      break;
    }
    case op_kind::remove:
      // The DEL ran: the block is gone, whether it was there or not.
      b.present[to.block] = r && r->type == REDIS_REPLY_INTEGER;
      if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0)
        ++removed;
      break;
  }
  if (--b.remaining == 0)
    answer(to.b);
}

void redis_backend::loop::answer(const std::shared_ptr<batch>& bp) {
  batch& b = *bp;
  busy_ns += now_ns() - b.started_ns;
  ++batches;
  switch (b.what) {
    case op_kind::exists:
      b.on_exists(std::move(b.present));
      break;
    case op_kind::get:
      for (size_t i = 0; i < b.present.size(); ++i) {
        if (b.present[i]) {
          ++gets_hit;
          bytes_read += b.into[i].size;
        } else {
          ++gets_missed;
        }
      }
      b.on_get(std::move(b.present));
      break;
    case op_kind::put: {
      std::vector<bool> stored(b.blocks.size());
      for (size_t i = 0; i < stored.size(); ++i) {
        stored[i] = b.parts_ok[i] == 3;
        if (stored[i]) {
          ++puts_ok;
          bytes_written += b.payloads[i].size();
        } else {
          ++puts_failed;
        }
      }
      b.payloads.clear();
      b.on_put(std::move(stored));
      break;
    }
    case op_kind::remove:
      b.on_remove(std::move(b.present));
      break;
  }
}

}  // namespace kvtier
