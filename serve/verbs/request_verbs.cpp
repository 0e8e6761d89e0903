// The request verbs (docs/protocol.md): lookup matches a prompt and takes nothing, allocate
// registers a request with the controller (which may prefetch it from storage), wait answers
// once it has loaded.

#include <algorithm>

#include "model/storage/storage_index.hpp"
#include "serve/prompt_blocks.hpp"
#include "serve/codec/request_replies.hpp"
#include "serve/server_state.hpp"

namespace kvtier::serve {

namespace {

std::optional<std::string> blocks_of(self_ptr self, const prompt& p,
                                     std::vector<cache_block>& out,
                                     std::vector<block_origin>* origins = nullptr) {
  const auto& s = self->state.settings;
  return prompt_blocks(p, s.block_size, s.max_blocks_per_request, out, origins);
}

void on_ready(self_ptr self, const ready& rd) {
  auto& st = self->state;
  auto o = st.owners.find(rd.req);
  if (o == st.owners.end())
    return;
  if (o->second.engine == 0) {  // its engine left while it loaded
    st.owners.erase(o);
    commit c;
    c.finished.push_back(rd.req);
    send_commit(self, std::move(c), [](const grant&) {});
    return;
  }
  auto& e = st.engines.at(o->second.engine);
  live_request& r = e.requests.at(o->second.req);
  r.state = req_state::waiting;
  r.prefetched = rd.prefetched_blocks;
  r.available = rd.available_blocks;
  for (const waiter& w : r.waiters) {
    msgpack::sbuffer buf;
    encode_wait_reply(buf, w.id, rd);
    answer(self, w.conn, verb::wait, w.since, buf);
  }
  r.waiters.clear();
}

}  // namespace

void do_lookup(self_ptr self, ctx& x) {
  std::vector<cache_block> blocks;
  if (auto bad = blocks_of(self, x.c.text, blocks))
    return fail(self, x.conn, x.c.op, x.c.id, x.since, error_kind::bad_request, *bad);
  // Version 3: the engine's device holds its own prefix; kvtier offers what follows it in the
  // tiers it loads from (host, storage), never its model of the device (docs/protocol.md).
  std::optional<size_t> engine_prefix;
  if (auto en = self->state.engines.find(x.c.engine.value_or(0));
      en != self->state.engines.end() && en->second.version >= engine_tier_version)
    engine_prefix = std::min<size_t>(x.c.computed_tokens / self->state.settings.block_size,
                                     blocks.size());
  auto reply = [=](const prefix_hit& h, uint32_t storage_blocks, uint64_t storage_tokens) {
    for (auto& o : self->state.settings.observers)
      o->on_hits(verb::lookup, static_cast<uint32_t>(blocks.size()), h.device_blocks,
                 h.host_blocks, storage_blocks);
    msgpack::sbuffer buf;
    encode_lookup_reply(buf, x.c.id, {h, storage_blocks, storage_tokens});
    answer(self, x.conn, x.c.op, x.since, buf);
  };
  bool storage = self->state.settings.storage;
  uint64_t ns = self->state.settings.storage_namespace;
  self->request(self->state.controller, caf::infinite, prefix_lookup{blocks})
    .then(
      [=](prefix_hit h) {
        size_t from = size_t{h.device_blocks} + h.host_blocks;
        if (engine_prefix) {
          if (*engine_prefix < h.device_blocks)  // only kvtier's device holds what follows
            return reply({}, 0, 0);
          size_t first = *engine_prefix;
          h = prefix_hit{0, static_cast<uint32_t>(from > first ? from - first : 0), 0, 0};
          for (size_t i = first; i < from; ++i)
            h.host_tokens += blocks[i].tokens;
          from = std::max(from, first);
        }
        if (!storage || from >= blocks.size())
          return reply(h, 0, 0);
        exists_query q;
        for (size_t i = from; i < blocks.size(); ++i)
          q.keys.push_back(make_storage_key(ns, blocks[i].hash));
        self->request(self->state.storage, caf::infinite, std::move(q))
          .then(
            [=](const exists_reply& r) {
              uint64_t tokens = 0;
              for (size_t i = from; i < from + r.leading && i < blocks.size(); ++i)
                tokens += blocks[i].tokens;
              reply(h, r.leading, tokens);
            },
            // Storage that cannot answer holds nothing, as for the controller's own lookups.
            [=](const caf::error&) { reply(h, 0, 0); });
      },
      [=](const caf::error& e) { self->quit(e); });
}

void do_allocate(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  auto& st = self->state;
  const call& c = x.c;
  auto found = e.requests.find(c.req);
  auto reply_state = [=](uint64_t id, const live_request& r) {
    msgpack::sbuffer buf;
    std::optional<ready> loaded;
    if (r.state != req_state::loading)
      loaded = ready{r.global, r.prefetched, r.available};
    encode_allocate_reply(buf, id, loaded);
    answer(self, x.conn, verb::allocate, x.since, buf);
  };
  if (found != e.requests.end()) {
    if (c.text.kind != prompt::form::none)
      return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request,
                  "request " + std::to_string(c.req) + " is already allocated (ask again without "
                  "a prompt)");
    return reply_state(c.id, found->second);
  }
  if (c.text.kind == prompt::form::none)
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::malformed,
                "'allocate' of a new request needs 'tokens', 'hashes' or 'blocks'");
  std::vector<cache_block> blocks;
  std::vector<block_origin> origins;
  block_origins* table = st.settings.origins;
  if (auto bad = blocks_of(self, c.text, blocks, table ? &origins : nullptr))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  // Full blocks only: events announce what a router can match block for block.
  for (size_t i = 0; table && i < blocks.size(); ++i)
    if (blocks[i].tokens == st.settings.block_size)
      table->remember(blocks[i].hash, std::move(origins[i]));
  request_id global = st.next_request++;
  live_request& r = e.requests[c.req];
  r.global = global;
  r.prompt_blocks = static_cast<uint32_t>(blocks.size());
  if (e.version >= engine_tier_version)
    r.names = blocks;
  st.owners[global] = {engine, c.req};
  self->request(st.controller, caf::infinite, arrival{global, std::move(blocks)})
    .then([=](const ready& rd) { on_ready(self, rd); },
          [=](const caf::error& err) { self->quit(err); });
  // The controller answers an arrival at once unless storage must be asked or loaded from; a
  // lookup sent behind it is answered after it, so its answer tells which case this is.
  uint64_t req = c.req, id = c.id;
  self->request(st.controller, caf::infinite, prefix_lookup{})
    .then(
      [=](const prefix_hit&) {
        auto& s2 = self->state;
        auto en = s2.engines.find(engine);
        if (en == s2.engines.end())
          return;  // the engine left: nobody waits for the answer
        auto rq = en->second.requests.find(req);
        if (rq == en->second.requests.end())
          return fail(self, x.conn, verb::allocate, id, x.since, error_kind::bad_request,
                      "request " + std::to_string(req)
                        + " was finished before its allocation was answered");
        reply_state(id, rq->second);
      },
      [=](const caf::error& err) { self->quit(err); });
}

void do_wait(self_ptr self, ctx& x, engine_state& e) {
  auto it = e.requests.find(x.c.req);
  if (it == e.requests.end())
    return fail(self, x.conn, x.c.op, x.c.id, x.since, error_kind::bad_request,
                "request " + std::to_string(x.c.req) + " is not allocated");
  live_request& r = it->second;
  if (r.state == req_state::loading) {
    r.waiters.push_back({x.conn, x.c.id, x.since});
    return;
  }
  msgpack::sbuffer buf;
  encode_wait_reply(buf, x.c.id, ready{r.global, r.prefetched, r.available});
  answer(self, x.conn, x.c.op, x.since, buf);
}

}  // namespace kvtier::serve
