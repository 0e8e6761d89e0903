// The engine-owned device tier (device_owner::engine; docs/protocol.md, version 3): the engine's
// KV cache manager owns the device blocks and names them in `admits` and `grows`; the session
// keeps each running request's table of them, what the engine's blocks hold, and tells the
// engine which of its blocks kvtier loads into.

#include <algorithm>

#include "model/session/engine_session.hpp"

namespace kvtier::session {

namespace {

uint32_t blocks_for(uint32_t tokens, uint32_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

std::optional<std::string> check_ids(const std::vector<uint32_t>& ids, uint32_t device_blocks,
                                     const std::string& who) {
  for (uint32_t id : ids)
    if (id >= device_blocks)
      return who + " names device block " + std::to_string(id) + ", beyond the engine's "
             + std::to_string(device_blocks) + " blocks";
  return std::nullopt;
}

// Entry i's ids; an entry that gave none has an empty list.
const std::vector<uint32_t>& ids_of(const std::vector<std::vector<uint32_t>>& lists, size_t i) {
  static const std::vector<uint32_t> none;
  return i < lists.size() ? lists[i] : none;
}

std::string named(const char* list, uint64_t req) {
  return "request " + std::to_string(req) + " in '" + list + "'";
}

}  // namespace

std::optional<std::string> engine_session::check_device_tables(const commit& c) const {
  bool any = false;
  for (const auto* lists : {&c.admit_blocks, &c.grow_blocks})
    for (const auto& ids : *lists)
      any = any || !ids.empty();
  if (options_.owner != device_owner::engine)
    return any ? std::optional<std::string>("device block ids in 'admits' or 'grows' need "
                                            "protocol version 3 (the engine-owned device tier)")
               : std::nullopt;
  const uint32_t block_size = options_.block_size, device_blocks = options_.device_blocks;
  for (size_t i = 0; i < c.admits.size(); ++i) {
    const token_mark& m = c.admits[i];
    const auto& ids = ids_of(c.admit_blocks, i);
    uint32_t want = blocks_for(m.tokens, block_size);
    if (ids.size() != want)
      return named("admits", m.req) + " gives " + std::to_string(ids.size())
             + " device block ids for " + std::to_string(m.tokens) + " tokens: version 3 needs "
             + std::to_string(want) + ", the engine's block table";
    if (auto bad = check_ids(ids, device_blocks, named("admits", m.req)))
      return bad;
  }
  for (size_t i = 0; i < c.grows.size(); ++i) {
    const token_mark& m = c.grows[i];
    const auto& ids = ids_of(c.grow_blocks, i);
    const session_request* r = find(m.req);
    size_t held = r ? r->device_table.size() : 0;
    size_t want = std::max<size_t>(blocks_for(m.tokens, block_size), held) - held;
    if (ids.size() != want)
      return named("grows", m.req) + " gives " + std::to_string(ids.size())
             + " new device block ids: it holds " + std::to_string(held) + " and "
             + std::to_string(m.tokens) + " tokens need " + std::to_string(want) + " more";
    if (auto bad = check_ids(ids, device_blocks, named("grows", m.req)))
      return bad;
  }
  return std::nullopt;
}

std::optional<std::string> engine_session::check_evictions(const engine_step& s) const {
  if (s.evicted.empty())
    return std::nullopt;
  if (options_.owner != device_owner::engine)
    return std::string("'evicted' needs protocol version 3 (the engine-owned device tier)");
  const commit& c = s.work;
  std::unordered_map<uint64_t, uint64_t> holder;  // block id -> a request still running
  for (const auto& [req, r] : st_.requests) {
    bool released = std::find(c.finished.begin(), c.finished.end(), req) != c.finished.end();
    for (const token_mark& m : c.preempted)
      released = released || m.req == req;
    if (!released)
      for (uint32_t id : r.device_table)
        holder.emplace(id, req);
  }
  for (uint64_t id : s.evicted) {
    if (id >= options_.device_blocks)
      return "'evicted' names device block " + std::to_string(id) + ", beyond the engine's "
             + std::to_string(options_.device_blocks) + " blocks";
    if (auto h = holder.find(id); h != holder.end())
      return "'evicted' names device block " + std::to_string(id) + ", which request "
             + std::to_string(h->second) + " still holds (a running request's blocks stay)";
  }
  return std::nullopt;
}

// `drop`: the engine reported the block evicted; else (an id reused without a report) only the
// count goes: kvtier drops nothing the engine did not report (docs/protocol.md).
void engine_session::forget_device_block(uint32_t id, bool drop, commit& work) {
  auto it = st_.device_contents.find(id);
  if (it == st_.device_contents.end())
    return;
  block_hash name = it->second;
  st_.device_contents.erase(it);
  if (--st_.device_copies[name] > 0)
    return;
  st_.device_copies.erase(name);
  if (drop)
    work.device_dropped.push_back(name);
}

// Records which names the `computed` blocks hold on the engine's device, then takes the
// `evicted` ids out: a name no block of the engine holds any more goes to `work`'s
// device_dropped, for the controller to forget its device copy.
void engine_session::note_device_contents(const engine_step& s, commit& work) {
  if (options_.owner != device_owner::engine)
    return;
  for (const token_mark& m : s.work.computed) {
    const session_request& r = st_.requests.at(m.req);  // computed: running, so allocated
    // The prompt's blocks whose every token is computed (a trace's partial last one included).
    uint64_t end = 0;
    for (size_t i = 0; i < r.names.size() && i < r.device_table.size(); ++i) {
      end += r.names[i].tokens;
      if (end > m.tokens)
        break;
      block_hash name = r.names[i].hash;
      auto [it, added] = st_.device_contents.try_emplace(r.device_table[i], name);
      if (!added && it->second == name)
        continue;
      if (!added) {  // reused without an eviction report
        forget_device_block(r.device_table[i], false, work);
        st_.device_contents[r.device_table[i]] = name;
      }
      ++st_.device_copies[name];
    }
  }
  for (uint64_t id : s.evicted)
    forget_device_block(static_cast<uint32_t>(id), true, work);
}

// A granted step (`c`: with the engine's request ids, shorthands' included) applied to the
// requests' block tables (`admitted`: each grant admission's engine request; `failed`: the
// engine's failed grows); returns each admission's `load_blocks`.
std::vector<std::vector<uint32_t>> engine_session::settle_device_tables(
  const commit& c, const grant& g, const std::vector<uint64_t>& admitted,
  const std::vector<uint64_t>& failed) {
  for (const token_mark& m : c.preempted)
    if (auto it = st_.requests.find(m.req); it != st_.requests.end())
      it->second.device_table.clear();
  for (size_t i = 0; i < c.grows.size(); ++i) {
    uint64_t req = c.grows[i].req;
    auto it = st_.requests.find(req);
    if (it == st_.requests.end() || std::find(failed.begin(), failed.end(), req) != failed.end())
      continue;
    const auto& ids = ids_of(c.grow_blocks, i);
    it->second.device_table.insert(it->second.device_table.end(), ids.begin(), ids.end());
  }
  std::vector<std::vector<uint32_t>> loads(g.admits.size());
  for (size_t i = 0; i < g.admits.size(); ++i) {
    const admit_result& a = g.admits[i];
    auto it = st_.requests.find(admitted[i]);
    if (!a.admitted || it == st_.requests.end())
      continue;
    for (size_t j = 0; j < c.admits.size(); ++j)
      if (c.admits[j].req == admitted[i])
        it->second.device_table = ids_of(c.admit_blocks, j);
    // kvtier writes the blocks after the device hits: the host hits, then storage's.
    const auto& table = it->second.device_table;
    size_t from = std::min<size_t>(a.device_blocks, table.size());
    size_t to = std::min<size_t>(from + a.host_blocks + a.storage_blocks, table.size());
    loads[i].assign(table.begin() + from, table.begin() + to);
  }
  return loads;
}

}  // namespace kvtier::session
