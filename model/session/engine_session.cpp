// The engine session's requests and steps (engine_session.hpp). Its invariants, checked by
// check() and each shown to fire on a corrupted session by tests/model/session/:
//  S1 ids: each request has a controller id, no two share one, and the map back from the
//     controller's ids holds exactly those;
//  S2 waiters: only a request still loading has calls parked in `wait`;
//  S3 owner: device block ids, prompt names and device contents only with device_owner::engine,
//     and every device block id below the device tier's size;
//  S4 copies: the count of blocks holding each name is what the device contents hold.

#include "model/session/engine_session.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier::session {

const session_request* engine_session::find(uint64_t req) const {
  auto it = st_.requests.find(req);
  return it == st_.requests.end() ? nullptr : &it->second;
}

std::optional<uint64_t> engine_session::engine_id(request_id global) const {
  auto it = st_.engine_ids.find(global);
  if (it == st_.engine_ids.end())
    return std::nullopt;
  return it->second;
}

bool engine_session::has_waiters() const {
  for (const auto& [req, r] : st_.requests)
    if (!r.waiters.empty())
      return true;
  return false;
}

std::optional<std::string> engine_session::allocate(uint64_t req, request_id global,
                                                    const std::vector<cache_block>& blocks) {
  if (st_.requests.count(req))
    return "request " + std::to_string(req) + " is already allocated";
  if (global == 0 || st_.engine_ids.count(global))
    return "request " + std::to_string(req) + ": controller id " + std::to_string(global)
           + " is taken";
  session_request& r = st_.requests[req];
  r.global = global;
  r.prompt_blocks = static_cast<uint32_t>(blocks.size());
  if (options_.owner == device_owner::engine)
    r.names = blocks;
  st_.engine_ids[global] = req;
  return std::nullopt;
}

std::optional<std::string> engine_session::loaded(const ready& rd,
                                                  std::vector<parked_call>& woken) {
  std::optional<uint64_t> req = engine_id(rd.req);
  if (!req)
    return "the controller's ready names request " + std::to_string(rd.req)
           + ", which is none of the engine's";
  session_request& r = st_.requests.at(*req);
  transition t = next_state(r.state, req_event::loaded);
  if (!t.legal)
    return refusal(*req, req_event::loaded, r.state);
  r.state = *t.to;
  r.prefetched = rd.prefetched_blocks;
  r.available = rd.available_blocks;
  woken = std::move(r.waiters);
  r.waiters.clear();
  return std::nullopt;
}

bool engine_session::park_until_loaded(uint64_t req, const parked_call& c) {
  auto it = st_.requests.find(req);
  if (it == st_.requests.end() || it->second.state != req_state::loading)
    return false;
  it->second.waiters.push_back(c);
  return true;
}

// Each list's transitions on `after` (the states as the step leaves them); the ids in `work`
// become the controller's.
std::optional<std::string> engine_session::check_states(commit& work, overlay& after) const {
  auto take = [&](uint64_t& req, req_event e) -> std::optional<std::string> {
    auto a = after.find(req);
    std::optional<req_state> from = a != after.end() ? a->second
                                     : find(req)     ? std::optional(find(req)->state)
                                                     : std::nullopt;
    transition t = next_state(from, e);
    if (!t.legal)
      return refusal(req, e, from);
    if (t.to != from)
      after[req] = t.to;
    req = st_.requests.at(req).global;  // a legal event's request exists
    return std::nullopt;
  };
  for (token_mark& m : work.computed)
    if (auto bad = take(m.req, req_event::computed))
      return bad;
  for (request_id& req : work.finished)
    if (auto bad = take(req, req_event::finished))
      return bad;
  for (token_mark& m : work.preempted)
    if (auto bad = take(m.req, req_event::preempted))
      return bad;
  for (token_mark& m : work.grows)
    if (auto bad = take(m.req, req_event::grown))
      return bad;
  for (token_mark& m : work.admits) {
    uint64_t req = m.req;
    if (auto bad = take(m.req, req_event::admitted))
      return bad;
    if (m.tokens == 0)
      return "request " + std::to_string(req) + " is admitted for 0 tokens";
  }
  return std::nullopt;
}

std::optional<std::string> engine_session::begin_step(const engine_step& s, begun_step& out) {
  if (s.number && *s.number <= st_.last_step)
    return "step " + std::to_string(*s.number) + " does not follow step "
           + std::to_string(st_.last_step) + " (an engine's step numbers increase)";
  out.number = s.number.value_or(st_.last_step + 1);
  out.work = s.work;
  overlay after;
  if (auto bad = check_states(out.work, after))
    return bad;
  if (auto bad = check_device_tables(s.work))
    return bad;
  if (auto bad = check_evictions(s))
    return bad;
  // From here the step is the engine's: nothing is refused any more.
  st_.last_step = out.number;
  note_device_contents(s, out.work);
  if (options_.owner != device_owner::engine) {
    out.work.admit_blocks.clear();
    out.work.grow_blocks.clear();
  }
  for (const auto& [req, to] : after) {
    auto it = st_.requests.find(req);
    KVTIER_ASSERT(it != st_.requests.end());
    if (to) {
      it->second.state = *to;
      continue;
    }
    st_.engine_ids.erase(it->second.global);
    st_.requests.erase(it);
  }
  return std::nullopt;
}

std::optional<std::string> engine_session::end_step(const engine_step& s, const grant& g,
                                                    settled_step& out) {
  out = settled_step{};
  overlay after;
  for (const admit_result& a : g.admits) {
    std::optional<uint64_t> req = engine_id(a.req);
    if (!req)
      return "the grant admits the controller's request " + std::to_string(a.req)
             + ", which is none of the engine's";
    auto seen = after.find(*req);
    std::optional<req_state> from =
      seen != after.end() ? seen->second : std::optional(st_.requests.at(*req).state);
    req_event e = a.admitted ? req_event::granted : req_event::refused;
    transition t = next_state(from, e);
    if (!t.legal)
      return refusal(*req, e, from);
    after[*req] = t.to;
    out.admits.push_back(*req);
  }
  for (const auto& [req, to] : after)
    st_.requests.at(req).state = *to;  // a grant's transitions never leave
  for (uint64_t req : out.admits)
    out.prompt_blocks.push_back(st_.requests.at(req).prompt_blocks);
  std::vector<uint64_t> failed;
  for (request_id r : g.failed_grows) {
    std::optional<uint64_t> req = engine_id(r);  // none: finished by a later step meanwhile
    out.failed_grows.push_back(req.value_or(0));
    if (req)
      failed.push_back(*req);
  }
  if (options_.owner == device_owner::engine)
    out.load_blocks = settle_device_tables(s.work, g, out.admits, failed);
  return std::nullopt;
}

released_requests engine_session::release_all() {
  released_requests out;
  for (const auto& [req, r] : st_.requests)
    (r.state == req_state::loading ? out.loading : out.finished).push_back(r.global);
  for (const auto& [name, copies] : st_.device_copies)
    out.device_dropped.push_back(name);
  std::sort(out.device_dropped.begin(), out.device_dropped.end());  // one order for replays
  st_.requests.clear();
  st_.engine_ids.clear();
  st_.device_contents.clear();
  st_.device_copies.clear();
  return out;
}

void engine_session::check(invariant_report& report) const {
  bool engine_owned = options_.owner == device_owner::engine;
  for (const auto& entry : st_.requests) {
    // Named, not bound: C++17 lambdas cannot capture structured bindings (clang refuses).
    uint64_t req = entry.first;
    const auto& r = entry.second;
    auto back = st_.engine_ids.find(r.global);
    report.expect(r.global != 0 && back != st_.engine_ids.end() && back->second == req, [&] {
      return "S1: request " + std::to_string(req) + "'s controller id "
             + std::to_string(r.global) + " does not map back to it";
    });
    report.expect(r.waiters.empty() || r.state == req_state::loading, [&] {
      return "S2: request " + std::to_string(req) + " has calls parked in 'wait' while "
             + state_name(r.state);
    });
    bool ids_fit = engine_owned || (r.device_table.empty() && r.names.empty());
    for (uint32_t id : r.device_table)
      ids_fit = ids_fit && id < options_.device_blocks;
    report.expect(ids_fit, [&] {
      return "S3: request " + std::to_string(req) + " holds device block ids "
             + (engine_owned ? "beyond the device tier" : "though kvtier owns the device");
    });
  }
  report.expect(st_.engine_ids.size() == st_.requests.size(), [&] {
    return "S1: " + std::to_string(st_.engine_ids.size()) + " controller ids for "
           + std::to_string(st_.requests.size()) + " requests";
  });
  std::unordered_map<block_hash, uint32_t> copies;
  for (const auto& [id, name] : st_.device_contents) {
    report.expect(engine_owned && id < options_.device_blocks, [&, id = id] {
      return "S3: device block " + std::to_string(id) + " has recorded contents "
             + (engine_owned ? "beyond the device tier" : "though kvtier owns the device");
    });
    ++copies[name];
  }
  report.expect(copies == st_.device_copies, [&] {
    return "S4: the copy counts of " + std::to_string(st_.device_copies.size())
           + " names do not match the device contents (" + std::to_string(copies.size())
           + " names)";
  });
}

}  // namespace kvtier::session
