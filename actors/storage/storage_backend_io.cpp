#include <algorithm>

#include "actors/storage/storage_state.hpp"
#include "core/check.hpp"

namespace kvtier::storage_impl {

namespace {

std::vector<block_ref> refs_of(const storage_state& st, const std::vector<uint64_t>& keys) {
  std::vector<block_ref> refs;
  refs.reserve(keys.size());
  for (uint64_t k : keys) {
    auto it = st.hash_of.find(k);
    refs.push_back({k, it == st.hash_of.end() ? 0 : it->second});
  }
  return refs;
}

}  // namespace

// When a backend's completion ran: the actor clock's time since its epoch (storage_backend_done).
int64_t backend_clock_now() {
  return caf::actor_clock::clock_type::now().time_since_epoch().count();
}

// Deletes blocks' bytes; nothing waits for the delete. On a real backend, the blocks whose delete
// has not completed are counted (they still take its room), and those whose delete could not run
// are owed (on_removed).
void delete_blocks(self_ptr self, std::vector<block_ref> blocks) {
  auto& st = self->state;
  if (blocks.empty())
    return;
  if (!st.backend->asynchronous()) {
    st.backend->remove(std::move(blocks), [](std::vector<bool>) {});
    return;
  }
  uint64_t id = st.next_io++;
  pending_io io;
  io.what = pending_io::kind::remove;
  for (const block_ref& b : blocks) {
    io.keys.push_back(b.key);
    io.hashes.push_back(b.hash);
  }
  st.ios.emplace(id, std::move(io));
  st.deletes_in_flight += blocks.size();
  st.report.deletes_in_flight_max =
    std::max(st.report.deletes_in_flight_max, st.deletes_in_flight);
  auto me = caf::actor_cast<storage_actor>(self);
  st.backend->remove(std::move(blocks), [me, id](std::vector<bool> gone) {
    caf::anon_send(me, storage_backend_done{id, std::vector<uint8_t>(gone.begin(), gone.end()),
                                            {}, {}, backend_clock_now()});
  });
}

// Deletes evicted blocks' bytes (the index chose them).
void remove_from_backend(self_ptr self, const std::vector<uint64_t>& victims) {
  auto& st = self->state;
  if (victims.empty())
    return;
  std::vector<block_ref> refs = refs_of(st, victims);
  for (uint64_t k : victims)
    st.hash_of.erase(k);
  delete_blocks(self, std::move(refs));
}

// Asks the backend for a request's bytes; its answer comes back as a storage_backend_done.
void start_backend(self_ptr self, uint64_t id) {
  auto& st = self->state;
  pending_io& io = st.ios.at(id);
  auto me = caf::actor_cast<storage_actor>(self);
  switch (io.what) {
    case pending_io::kind::exists: {
      // Only what the index holds can be there; the backend says whether it still is.
      size_t leading = st.index->leading_run(io.keys.data(), io.keys.size());
      std::vector<uint64_t> keys(io.keys.begin(), io.keys.begin() + static_cast<long>(leading));
      st.backend->exists(refs_of(st, keys), [me, id](std::vector<bool> present) {
        storage_backend_done d{id, std::vector<uint8_t>(present.begin(), present.end()), {}, {},
                               backend_clock_now()};
        caf::anon_send(me, std::move(d));
      });
      return;
    }
    case pending_io::kind::get: {
      KVTIER_ASSERT(io.into.size() == io.keys.size());
      io.leased.assign(io.keys.size(), 0);
      std::vector<block_ref> refs;
      std::vector<block_span> into;
      for (size_t i = 0; i < io.keys.size(); ++i) {
        if (!st.index->contains(io.keys[i]) || get_fails(st) || !st.index->lease(io.keys[i]))
          continue;
        io.leased[i] = 1;
        uint64_t hash = i < io.hashes.size() ? io.hashes[i] : 0;
        auto it = st.hash_of.find(io.keys[i]);
        refs.push_back({io.keys[i], it != st.hash_of.end() ? it->second : hash});
        into.push_back({reinterpret_cast<uint8_t*>(io.into[i].address), io.into[i].size});
      }
      st.backend->get(std::move(refs), std::move(into), [me, id](std::vector<bool> found) {
        storage_backend_done d{id, std::vector<uint8_t>(found.begin(), found.end()), {}, {},
                               backend_clock_now()};
        caf::anon_send(me, std::move(d));
      });
      return;
    }
    case pending_io::kind::put: {
      KVTIER_ASSERT(io.hashes.size() == io.keys.size() && io.payloads.size() == io.keys.size());
      if (io.keys.empty()) {  // every key was stored or in flight already: nothing to write
        add_service_time(self, io);
        io.io_promise.deliver(storage_io_reply{0, 0, {}});
        st.ios.erase(id);
        return;
      }
      std::vector<block_ref> refs;
      for (size_t i = 0; i < io.keys.size(); ++i)
        refs.push_back({io.keys[i], io.hashes[i]});
      st.backend->put(std::move(refs), std::move(io.payloads), [me, id](std::vector<bool> stored) {
        storage_backend_done d{id, std::vector<uint8_t>(stored.begin(), stored.end()), {}, {},
                               backend_clock_now()};
        caf::anon_send(me, std::move(d));
      });
      return;
    }
    default:
      return;  // removes and listings start where they are asked for
  }
}

namespace {

void on_rebuilt(self_ptr self, std::vector<uint64_t>& hashes) {
  auto& st = self->state;
  uint64_t indexed = 0;
  std::vector<uint64_t> victims;
  for (uint64_t h : hashes) {
    uint64_t key = make_storage_key(st.options.name_space, h);
    if (st.index->contains(key))
      continue;
    if (!st.index->put(key, &victims))
      continue;
    st.hash_of[key] = h;
    ++indexed;
  }
  indexed -= std::min<uint64_t>(indexed, victims.size());
  remove_from_backend(self, victims);  // a smaller pool than the one that wrote them
  st.report.rebuilt += indexed;
  for (auto& p : st.rebuilds)
    p.deliver(indexed);
  st.rebuilds.clear();
}

// The backend's answer to an exists: the leading run it still holds.
void on_exists_done(self_ptr self, pending_io& io, const storage_backend_done& d) {
  auto& st = self->state;
  uint32_t leading = 0;
  while (leading < d.ok.size() && d.ok[leading])
    ++leading;
  // Indexed but not there (its node is down, or came back empty): the index stops promising
  // it. Bytes a node still holds after a blip are overwritten by the block's next put.
  for (size_t i = leading; i < d.ok.size(); ++i)
    if (!d.ok[i] && st.index->erase(io.keys[i])) {
      st.hash_of.erase(io.keys[i]);
      ++st.report.misses;
    }
  grant_exists_leases(st, io.keys, leading);
  io.exists_promise.deliver(exists_reply{leading});
}

// The backend's answer to a get: what it read, of the keys leased before reading.
void on_get_done(self_ptr self, pending_io& io, const storage_backend_done& d) {
  auto& st = self->state;
  storage_io_reply reply;
  reply.found.assign(io.keys.size(), 0);
  std::vector<uint64_t> leased;
  size_t next = 0;  // the backend answered for the leased keys, in order
  for (size_t i = 0; i < io.keys.size(); ++i) {
    if (!io.leased[i])
      continue;
    size_t j = next++;
    if (d.ok[j]) {
      reply.found[i] = 1;
      leased.push_back(io.keys[i]);
      continue;
    }
    // Indexed but gone (its node went down or came back empty): a miss, and no longer held.
    st.index->release_lease(io.keys[i]);
    st.index->erase(io.keys[i]);
    st.hash_of.erase(io.keys[i]);
    ++st.report.misses;
  }
  reply.done = static_cast<uint32_t>(leased.size());
  st.report.keys_found += leased.size();
  reply.lease = st.next_io++;
  st.leases.emplace(reply.lease, std::move(leased));
  io.io_promise.deliver(std::move(reply));
}

// The backend's answer to a put: index what it stored, and take back what must not stay.
void on_put_done(self_ptr self, pending_io& io, const storage_backend_done& d) {
  auto& st = self->state;
  uint32_t stored = 0;
  std::vector<uint64_t> victims, refused;
  for (size_t i = 0; i < io.keys.size(); ++i) {
    if (!d.ok[i]) {
      ++st.report.puts_dropped;
      st.index->end_put(io.keys[i], false);
      continue;
    }
    if (st.reconciling)
      st.written_since_listing.emplace(io.keys[i], 1);
    if (!write_survived(st, io, i)) {
      st.index->end_put(io.keys[i], false);
      refused.push_back(io.keys[i]);  // written, but it must not stay: roll back
      st.hash_of.emplace(io.keys[i], io.hashes[i]);
      continue;
    }
    if (!st.index->end_put(io.keys[i], true, &victims)) {
      refused.push_back(io.keys[i]);  // the node is full of blocks being read
      st.hash_of.emplace(io.keys[i], io.hashes[i]);
      continue;
    }
    st.hash_of[io.keys[i]] = io.hashes[i];
    ++stored;
  }
  remove_from_backend(self, victims);
  remove_from_backend(self, refused);
  st.report.keys_stored += stored;
  io.io_promise.deliver(storage_io_reply{stored, 0, {}});
}

}  // namespace

void on_backend_done(self_ptr self, storage_backend_done& d) {
  auto& st = self->state;
  if (d.io == 0) {
    on_rebuilt(self, d.listed);
    return;
  }
  auto it = st.ios.find(d.io);
  KVTIER_ASSERT(it != st.ios.end());
  pending_io& io = it->second;
  if (io.what == pending_io::kind::remove || io.what == pending_io::kind::reconcile) {
    if (io.what == pending_io::kind::remove)
      on_removed(self, io, d);
    else
      on_reconciled(self, io, d);
    st.ios.erase(it);
    check_reconnects(self);
    return;
  }
  // Real I/O ended when the backend answered, on its own thread; the wait for this actor to take
  // the answer is not the media's time (the shadow model's is counted the same way).
  int64_t done = -1;
  if (d.done_at > 0 && st.backend->asynchronous())
    done = std::min(now_of(self), st.options.clock.at(caf::actor_clock::time_point(
                                    caf::actor_clock::duration_type(d.done_at))));
  add_service_time(self, io, done);
  switch (io.what) {
    case pending_io::kind::exists:
      on_exists_done(self, io, d);
      break;
    case pending_io::kind::get:
      on_get_done(self, io, d);
      break;
    case pending_io::kind::put:
      on_put_done(self, io, d);
      break;
    default:
      break;
  }
  st.ios.erase(it);
  check_reconnects(self);
}

// Asks the backend which blocks it holds; on_rebuilt indexes them when the list comes back.
caf::result<uint64_t> start_rebuild(self_ptr self) {
  auto& s = self->state;
  if (!s.backend)
    return uint64_t{0};  // the modelled pool keeps nothing across runs
  auto promise = self->make_response_promise<uint64_t>();
  s.rebuilds.push_back(promise);
  auto me = caf::actor_cast<storage_actor>(self);
  s.backend->list([me](block_listing listing) {
    storage_backend_done d;
    d.listed = std::move(listing.blocks);
    caf::anon_send(me, std::move(d));
  });
  return promise;
}

}  // namespace kvtier::storage_impl
