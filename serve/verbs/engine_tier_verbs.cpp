// Version 3's engine-owned device tier (docs/protocol.md): the engine's KV cache manager owns
// the device blocks and names them in `admits` and `grows`; the server keeps each running
// request's table of them and tells the engine which of its blocks kvtier loads into.

#include <algorithm>

#include "serve/server_state.hpp"

namespace kvtier::serve {

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

}  // namespace

std::optional<std::string> check_device_tables(const engine_state& e, const call& c,
                                               uint32_t block_size, uint32_t device_blocks) {
  auto named = [](const char* list, uint64_t req) {
    return "request " + std::to_string(req) + " in '" + list + "'";
  };
  bool any = false;
  for (const auto* lists : {&c.admit_blocks, &c.grow_blocks})
    for (const auto& ids : *lists)
      any = any || !ids.empty();
  if (e.version < engine_tier_version)
    return any ? std::optional<std::string>("device block ids in 'admits' or 'grows' need "
                                            "protocol version 3 (the engine-owned device tier)")
               : std::nullopt;
  for (size_t i = 0; i < c.step.admits.size(); ++i) {
    const token_mark& m = c.step.admits[i];
    const auto& ids = c.admit_blocks.at(i);
    uint32_t want = blocks_for(m.tokens, block_size);
    if (ids.size() != want)
      return named("admits", m.req) + " gives " + std::to_string(ids.size())
             + " device block ids for " + std::to_string(m.tokens) + " tokens: version 3 needs "
             + std::to_string(want) + ", the engine's block table";
    if (auto bad = check_ids(ids, device_blocks, named("admits", m.req)))
      return bad;
  }
  for (size_t i = 0; i < c.step.grows.size(); ++i) {
    const token_mark& m = c.step.grows[i];
    const auto& ids = c.grow_blocks.at(i);
    auto it = e.requests.find(m.req);
    size_t held = it == e.requests.end() ? 0 : it->second.device_table.size();
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

std::optional<std::string> check_evictions(const engine_state& e, const call& c,
                                           const commit& original, uint32_t device_blocks) {
  if (c.evicted.empty())
    return std::nullopt;
  if (e.version < engine_tier_version)
    return std::string("'evicted' needs protocol version 3 (the engine-owned device tier)");
  std::unordered_map<uint64_t, uint64_t> holder;  // block id -> a request still running
  for (const auto& [req, r] : e.requests) {
    bool released = std::find(original.finished.begin(), original.finished.end(), req)
                    != original.finished.end();
    for (const token_mark& m : original.preempted)
      released = released || m.req == req;
    if (!released)
      for (uint32_t id : r.device_table)
        holder.emplace(id, req);
  }
  for (uint64_t id : c.evicted) {
    if (id >= device_blocks)
      return "'evicted' names device block " + std::to_string(id) + ", beyond the engine's "
             + std::to_string(device_blocks) + " blocks";
    if (auto h = holder.find(id); h != holder.end())
      return "'evicted' names device block " + std::to_string(id) + ", which request "
             + std::to_string(h->second) + " still holds (a running request's blocks stay)";
  }
  return std::nullopt;
}

void note_device_contents(engine_state& e, const call& c, const commit& original,
                          commit& work) {
  if (e.version < engine_tier_version)
    return;
  // `drop`: the engine reported the block evicted; else (an id reused without a report) only
  // the count goes: kvtier drops nothing the engine did not report (docs/protocol.md).
  auto forget = [&](uint32_t id, bool drop) {
    auto it = e.device_contents.find(id);
    if (it == e.device_contents.end())
      return;
    block_hash name = it->second;
    e.device_contents.erase(it);
    if (--e.device_copies[name] > 0)
      return;
    e.device_copies.erase(name);
    if (drop)
      work.device_dropped.push_back(name);
  };
  for (const token_mark& m : original.computed) {
    const live_request& r = e.requests.at(m.req);
    // The prompt's blocks whose every token is computed (a trace's partial last one included).
    uint64_t end = 0;
    for (size_t i = 0; i < r.names.size() && i < r.device_table.size(); ++i) {
      end += r.names[i].tokens;
      if (end > m.tokens)
        break;
      block_hash name = r.names[i].hash;
      auto [it, added] = e.device_contents.try_emplace(r.device_table[i], name);
      if (!added && it->second == name)
        continue;
      if (!added) {  // reused without an eviction report
        forget(r.device_table[i], false);
        e.device_contents[r.device_table[i]] = name;
      }
      ++e.device_copies[name];
    }
  }
  for (uint64_t id : c.evicted)
    forget(static_cast<uint32_t>(id), true);
}

std::vector<std::vector<uint32_t>> settle_device_tables(engine_state& e, const call& c,
                                                        const commit& original, const grant& g,
                                                        const std::vector<uint64_t>& admitted,
                                                        const std::vector<uint64_t>& failed) {
  for (const token_mark& m : original.preempted)
    if (auto it = e.requests.find(m.req); it != e.requests.end())
      it->second.device_table.clear();
  for (size_t i = 0; i < c.step.grows.size(); ++i) {
    uint64_t req = c.step.grows[i].req;
    auto it = e.requests.find(req);
    if (it == e.requests.end() || std::find(failed.begin(), failed.end(), req) != failed.end())
      continue;
    const auto& ids = c.grow_blocks.at(i);
    it->second.device_table.insert(it->second.device_table.end(), ids.begin(), ids.end());
  }
  std::vector<std::vector<uint32_t>> loads(g.admits.size());
  for (size_t i = 0; i < g.admits.size(); ++i) {
    const admit_result& a = g.admits[i];
    auto it = e.requests.find(admitted[i]);
    if (!a.admitted || it == e.requests.end())
      continue;
    for (size_t j = 0; j < c.step.admits.size(); ++j)
      if (c.step.admits[j].req == admitted[i])
        it->second.device_table = c.admit_blocks.at(j);
    // kvtier writes the blocks after the device hits: the host hits, then storage's.
    const auto& table = it->second.device_table;
    size_t from = std::min<size_t>(a.device_blocks, table.size());
    size_t to = std::min<size_t>(from + a.host_blocks + a.storage_blocks, table.size());
    loads[i].assign(table.begin() + from, table.begin() + to);
  }
  return loads;
}

}  // namespace kvtier::serve
