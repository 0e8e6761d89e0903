// The request verbs (docs/protocol.md): lookup matches a prompt and takes nothing, allocate
// registers a request with the controller (which may prefetch it from storage), wait answers
// once it has loaded.

#include <algorithm>
#include <memory>

#include "model/storage/storage_index.hpp"
#include "serve/server/prompt_blocks.hpp"
#include "serve/server/server_state.hpp"
#include "serve/wire/request_replies.hpp"

namespace kvtier::serve {

namespace {

std::optional<std::string> blocks_of(self_ptr self, const prompt& p,
                                     std::vector<cache_block>& out,
                                     std::vector<block_origin>* origins = nullptr) {
  const auto& s = self->state.settings;
  return prompt_blocks(p, s.block_size, s.max_blocks_per_request, out, origins);
}

// Stack `stack`'s controller has what storage held for request `rd.req` of `engine`: the calls
// parked in `wait` are answered. One whose engine left meanwhile is finished now.
void on_ready(self_ptr self, uint64_t engine, uint32_t stack, const ready& rd) {
  auto& st = self->state;
  auto en = st.engines.find(engine);
  if (en == st.engines.end()) {
    if (st.orphans.erase(rd.req) == 0)
      return note_session_fault(self, "ready for request " + std::to_string(rd.req)
                                        + " of engine " + std::to_string(engine)
                                        + ", which left without it");
    commit c;
    c.finished.push_back(rd.req);
    send_commit(self, stack, std::move(c), [](const grant&) {});
    return;
  }
  std::vector<session::parked_call> woken;
  if (auto bad = en->second.session.loaded(rd, woken))
    return note_session_fault(self, *bad);
  for (const session::parked_call& w : woken) {
    msgpack::sbuffer buf;
    encode_wait_reply(buf, w.id, rd);
    answer(self, {w.conn, verb::wait, w.id, w.since}, buf);
  }
}

// The prefix a version 3 engine computed on its device (`computed_tokens`), in blocks; none
// below version 3.
std::optional<size_t> engine_prefix(self_ptr self, const call& c, size_t blocks) {
  auto en = self->state.engines.find(c.engine.value_or(0));
  if (en == self->state.engines.end() || en->second.version < engine_tier_version)
    return std::nullopt;
  return std::min<size_t>(c.computed_tokens / self->state.settings.block_size, blocks);
}

// Version 3: the engine's device holds its own prefix; kvtier offers what follows it in the
// tiers it loads from (host, storage), never its model of the device (docs/protocol.md).
// Returns the block after the hits (where storage is asked from); false: no hit at all.
bool after_engine_prefix(size_t first, const std::vector<cache_block>& blocks, prefix_hit& h,
                         size_t& from) {
  if (first < h.device_blocks)  // only kvtier's device holds what follows
    return false;
  h = prefix_hit{0, static_cast<uint32_t>(from > first ? from - first : 0), 0, 0};
  for (size_t i = first; i < from; ++i)
    h.host_tokens += blocks[i].tokens;
  from = std::max(from, first);
  return true;
}

}  // namespace

void do_lookup(self_ptr self, ctx& x, const engine_state& e) {
  // The prompt's blocks, shared by the continuations below rather than copied into each: a
  // lookup is sent per waiting request and step, and its prompt has hundreds of blocks.
  auto shared = std::make_shared<std::vector<cache_block>>();
  const std::vector<cache_block>& blocks = *shared;
  if (auto bad = blocks_of(self, x.c.text, *shared))
    return fail(self, x.to, error_kind::bad_request, *bad);
  std::optional<size_t> prefix = engine_prefix(self, x.c, blocks.size());
  reply_to to = x.to;
  auto reply = [self, to, n = static_cast<uint32_t>(blocks.size())](
                 const prefix_hit& h, uint32_t storage_blocks, uint64_t storage_tokens) {
    for (auto& o : self->state.settings.observers)
      o->on_hits(verb::lookup, n, h.device_blocks, h.host_blocks, storage_blocks);
    msgpack::sbuffer buf;
    encode_lookup_reply(buf, to.id, {h, storage_blocks, storage_tokens});
    answer(self, to, buf);
  };
  bool storage = self->state.settings.storage;
  uint64_t ns = self->state.settings.storage_namespace;
  self->request(controller_of(self, e.stack), caf::infinite, prefix_lookup{blocks})
    .then(
      [self, shared, prefix, reply, storage, ns](prefix_hit h) {
        const std::vector<cache_block>& blocks = *shared;
        size_t from = size_t{h.device_blocks} + h.host_blocks;
        if (prefix && !after_engine_prefix(*prefix, blocks, h, from))
          return reply({}, 0, 0);
        if (!storage || from >= blocks.size())
          return reply(h, 0, 0);
        exists_query q;
        for (size_t i = from; i < blocks.size(); ++i)
          q.keys.push_back(make_storage_key(ns, blocks[i].hash));
        self->request(self->state.storage, caf::infinite, std::move(q))
          .then(
            [shared, from, h, reply](const exists_reply& r) {
              const std::vector<cache_block>& blocks = *shared;
              uint64_t tokens = 0;
              for (size_t i = from; i < from + r.leading && i < blocks.size(); ++i)
                tokens += blocks[i].tokens;
              reply(h, r.leading, tokens);
            },
            // Storage that cannot answer holds nothing, as for the controller's own lookups.
            [h, reply](const caf::error&) { reply(h, 0, 0); });
      },
      [self](const caf::error& e) { self->quit(e); });
}

namespace {

// allocate's answer: ready (with what storage gave) once the request has loaded, else pending.
void reply_allocated(self_ptr self, const reply_to& to, const session::session_request& r) {
  msgpack::sbuffer buf;
  std::optional<ready> loaded;
  if (r.state != session::req_state::loading)
    loaded = ready{r.global, r.prefetched, r.available};
  encode_allocate_reply(buf, to.id, loaded);
  answer(self, to, buf);
}

// The controller answers an arrival at once unless storage must be asked or loaded from; a
// lookup sent behind it is answered after it, so its answer tells which case this is.
void answer_when_arrived(self_ptr self, const ctx& x, uint64_t engine, uint32_t stack) {
  uint64_t req = x.c.req;
  reply_to to = x.to;  // the reply needs no more of the call (its prompt is hundreds of blocks)
  self->request(controller_of(self, stack), caf::infinite, prefix_lookup{})
    .then(
      [self, engine, req, to](const prefix_hit&) {
        auto en = self->state.engines.find(engine);
        if (en == self->state.engines.end())
          return;  // the engine left: nobody waits for the answer
        const session::session_request* r = en->second.session.find(req);
        if (!r)
          return fail(self, to, error_kind::bad_request,
                      "request " + std::to_string(req)
                        + " was finished before its allocation was answered");
        reply_allocated(self, to, *r);
      },
      [self](const caf::error& err) { self->quit(err); });
}

}  // namespace

void do_allocate(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  auto& st = self->state;
  const call& c = x.c;
  if (const session::session_request* known = e.session.find(c.req)) {
    if (c.text.kind != prompt::form::none)
      return fail(self, x.to, error_kind::bad_request,
                  "request " + std::to_string(c.req) + " is already allocated (ask again without "
                  "a prompt)");
    return reply_allocated(self, x.to, *known);
  }
  if (c.text.kind == prompt::form::none)
    return fail(self, x.to, error_kind::malformed,
                "'allocate' of a new request needs 'tokens', 'hashes' or 'blocks'");
  std::vector<cache_block> blocks;
  std::vector<block_origin> origins;
  block_origins* table = st.settings.origins;
  if (auto bad = blocks_of(self, c.text, blocks, table ? &origins : nullptr))
    return fail(self, x.to, error_kind::bad_request, *bad);
  // Full blocks only: events announce what a router can match block for block.
  for (size_t i = 0; table && i < blocks.size(); ++i)
    if (blocks[i].tokens == st.settings.block_size)
      table->remember(blocks[i].hash, std::move(origins[i]));
  request_id global = st.directory->next_request++;
  if (auto bad = e.session.allocate(c.req, global, blocks))
    return fail(self, x.to, error_kind::bad_request, *bad);
  uint32_t stack = e.stack;
  self->request(controller_of(self, stack), caf::infinite, arrival{global, std::move(blocks)})
    .then([=](const ready& rd) { on_ready(self, engine, stack, rd); },
          [=](const caf::error& err) { self->quit(err); });
  answer_when_arrived(self, x, engine, stack);
}

void do_wait(self_ptr self, ctx& x, engine_state& e) {
  const session::session_request* r = e.session.find(x.c.req);
  if (!r)
    return fail(self, x.to, error_kind::bad_request,
                "request " + std::to_string(x.c.req) + " is not allocated");
  if (e.session.park_until_loaded(x.c.req, {x.to.conn, x.c.id, x.to.since}))
    return;
  msgpack::sbuffer buf;
  encode_wait_reply(buf, x.c.id, ready{r->global, r->prefetched, r->available});
  answer(self, x.to, buf);
}

}  // namespace kvtier::serve
