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
