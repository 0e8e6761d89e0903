#pragma once

// The server actor's state and what its verb handlers share (serve/verbs/, one file per group
// of verbs; serve/server_actor.cpp keeps the behaviour and dispatches each call). Every function
// here runs on the actor's thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "caf/all.hpp"

#include "serve/encode.hpp"
#include "serve/server_actor.hpp"

namespace kvtier::serve {

using steady = std::chrono::steady_clock;

enum class req_state : uint8_t { loading, waiting, admitting, running };

struct waiter {
  uint64_t conn = 0;
  uint64_t id = 0;
  steady::time_point since;
};

struct live_request {
  request_id global = 0;
  req_state state = req_state::loading;
  bool orphan = false;  // its engine left while it loaded: finished once it is ready
  uint32_t prefetched = 0;
  uint32_t available = 0;
  uint32_t prompt_blocks = 0;  // for the observers' hit counts
  std::vector<waiter> waiters;
  // Version 3: the engine's device block ids of the request's blocks, as admits and grows gave
  // them (empty while it does not run).
  std::vector<uint32_t> device_table;
  std::vector<cache_block> names;  // version 3: its prompt's blocks under the server's names
};

struct engine_state {
  std::string name;
  uint64_t conn = 0;
  steady::time_point last_seen;
  uint64_t last_step = 0;  // the engine's last step number, `step`'s and the shorthands' alike
  uint32_t version = 1;    // the protocol version its hello chose
  std::unordered_map<uint64_t, live_request> requests;
  // Version 3: what the engine's device blocks hold, as its `computed` reports named them, and
  // how many of its blocks hold each name; `evicted` takes them out (docs/protocol.md).
  std::unordered_map<uint32_t, block_hash> device_contents;
  std::unordered_map<block_hash, uint32_t> device_copies;
};

struct owner_ref {
  uint64_t engine = 0;
  uint64_t req = 0;
};

struct server_state {
  static inline const char* name = "serve";
  server_settings settings;
  cache_controller_actor controller;
  storage_actor storage;
  reply_sink sink;
  serve_counters counters;
  std::map<uint64_t, engine_state> engines;
  std::unordered_map<request_id, owner_ref> owners;  // controller id -> engine's request
  uint64_t next_engine = 1;
  request_id next_request = 1;
  uint64_t next_step = 1;  // the controller's step numbers, unique across engines
  bool stopping = false;
  // Real mode: the tensors attached (their hello's), swap-ins submitted whose step reply has
  // not gone yet, and step replies waiting for their swap-in's submission; by transfer id.
  std::optional<attach_request> attached;
  std::unordered_map<uint64_t, swap_in_signal> signals;
  std::unordered_map<uint64_t, std::function<void(const swap_in_signal&)>> parked;
};


using self_ptr = caf::stateful_actor<server_state>*;

/// A call being answered: the connection it came on, when the socket thread read it, and the
/// call itself.
struct ctx {
  uint64_t conn;
  steady::time_point since;
  call c;
};

// -- replies (server_actor.cpp) ------------------------------------------------------------------

/// The server's clock in virtual nanoseconds since it started (the replies' `now_ns`).
int64_t now_ns(self_ptr self);
/// Counts the call, tells the observers and hands the reply to the sink.
void answer(self_ptr self, uint64_t conn, verb op, steady::time_point since, msgpack::sbuffer& buf,
            std::optional<error_kind> err = std::nullopt);
/// Answers an error reply of `kind`.
void fail(self_ptr self, uint64_t conn, verb op, uint64_t id, steady::time_point since,
          error_kind kind, const std::string& message);

// -- engines and the controller (server_actor.cpp) -----------------------------------------------

/// Sends `c` under the next server-wide step number; `then` gets the grant.
void send_commit(self_ptr self, commit c, std::function<void(const grant&)> then);
/// Releases every request of `engine` and forgets it.
void drop_engine(self_ptr self, uint64_t engine);

// -- session verbs: hello, ping, bye, stats (verbs/session_verbs.cpp) ---------------------------

void do_hello(self_ptr self, ctx& x);
void do_ping(self_ptr self, ctx& x);
void do_bye(self_ptr self, ctx& x, engine_state& e, uint64_t engine);
void do_stats(self_ptr self, ctx& x);

// -- request verbs: lookup, allocate, wait (verbs/request_verbs.cpp) ----------------------------

void do_lookup(self_ptr self, ctx& x);
void do_allocate(self_ptr self, ctx& x, engine_state& e, uint64_t engine);
void do_wait(self_ptr self, ctx& x, engine_state& e);

// -- step verbs: probe, step and its shorthands (verbs/step_verbs.cpp) --------------------------

void do_probe(self_ptr self, ctx& x, engine_state& e);
/// step, commit, save, free, preempt, finish.
void do_step(self_ptr self, ctx& x, engine_state& e, uint64_t engine);

// -- version 3, the engine-owned device tier (verbs/engine_tier_verbs.cpp) -----------------------

/// Why a step's device block ids do not fit the engine's version, the requests' tables or the
/// device, if they do not; `c.step` still holds the engine's request ids.
std::optional<std::string> check_device_tables(const engine_state& e, const call& c,
                                               uint32_t block_size, uint32_t device_blocks);
/// Why a step's `evicted` must be refused, if it must: ids from an engine below version 3,
/// beyond the device, or held by a request still running after the step's releases.
std::optional<std::string> check_evictions(const engine_state& e, const call& c,
                                           const commit& original, uint32_t device_blocks);
/// Records which names the `computed` blocks hold on the engine's device, then takes the
/// `evicted` ids out: a name no block of the engine holds any more goes to `work`'s
/// device_dropped, for the controller to forget its device copy.
void note_device_contents(engine_state& e, const call& c, const commit& original,
                          commit& work);
/// Applies a granted step (`original`: with the engine's request ids, shorthands' included) to
/// the running requests' block tables (`admitted`: each grant
/// admission's engine request; `failed`: the engine's failed grows) and returns each
/// admission's `load_blocks`.
std::vector<std::vector<uint32_t>> settle_device_tables(engine_state& e, const call& c,
                                                        const commit& original, const grant& g,
                                                        const std::vector<uint64_t>& admitted,
                                                        const std::vector<uint64_t>& failed);

// -- real mode: the engine's tensors, bench_swap, swap-in signals (verbs/real_mode_verbs.cpp) ---

/// Why hello must be refused for its `tensors`, if it must; attaches them at the first hello.
std::optional<std::string> attach_tensors(self_ptr self, const call& c, uint32_t version);
void do_bench_swap(self_ptr self, ctx& x);
/// A swap-in was submitted on the device: the step reply parked for it goes now.
void on_swap_in_submitted(self_ptr self, swap_in_signal sig);

}  // namespace kvtier::serve
