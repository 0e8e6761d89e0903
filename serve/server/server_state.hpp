#pragma once

// A server actor's state (one shard's: one per controller stack) and what its verb handlers share
// (one file per group of verbs: session_verbs.cpp, request_verbs.cpp, step_verbs.cpp,
// real_mode_verbs.cpp; server_actor.cpp keeps the behaviour and dispatches each call). Each
// engine's requests and their states are its engine_session's (model/session/); the actor keeps
// what crosses its engines: their connections, the requests orphaned by an engine that left, real
// mode's swap-ins; what crosses shards is the engine_directory's. Every function here runs on the
// actor's thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "caf/all.hpp"

#include "core/check.hpp"
#include "model/session/engine_session.hpp"
#include "serve/server/engine_directory.hpp"
#include "serve/server/server_actor.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

using steady = std::chrono::steady_clock;

/// Where a call's reply goes and what it counts as: its connection, its verb, its id and when
/// the socket thread read it. Every reply, error replies included, needs no more.
struct reply_to {
  uint64_t conn = 0;
  verb op = verb::ping;
  uint64_t id = 0;
  steady::time_point since;
  /// The call named a known verb: its reply counts under `op` (stats.calls). A frame that did
  /// not (too large, not msgpack, no op, an unknown op) counts only as its error.
  bool counted = true;
};

/// A registered engine: its connection, when it was last heard from, the protocol version its
/// hello chose, the controller stack serving it (its shard's), and its session.
struct engine_state {
  std::string name;
  uint64_t conn = 0;
  steady::time_point last_seen;
  uint32_t version = 1;
  uint32_t stack = 0;
  session::engine_session session;
};

/// One shard of the server (docs/design.md, "Controller stacks"): the server actor of one
/// controller stack, serving the engines the socket thread placed on it (engine_directory.hpp).
/// With one stack it is the only shard and serves every engine.
struct server_state {
  static inline const char* name = "serve";
  server_settings settings;
  uint32_t stack = 0;  ///< the stack this shard serves
  /// Every stack's controller, by stack (stats sums their reports); this shard sends block work
  /// to its own only.
  std::vector<cache_controller_actor> controllers;
  /// Every shard, by stack, this one included (stats sums their counters); set before any call.
  std::shared_ptr<std::vector<caf::actor>> shards;
  std::shared_ptr<engine_directory> directory;
  storage_actor storage;
  reply_sink sink;
  serve_counters counters;
  std::map<uint64_t, engine_state> engines;
  /// The controller's ids of requests still loading whose engine left: finished once loaded.
  std::unordered_set<request_id> orphans;
  bool stopping = false;
  /// Controller answers a session refused (only a fault of the server's own makes one):
  /// reported with the controller's invariant violations in `stats`.
  uint64_t session_faults = 0;
  // Real mode: the tensors attached (their hello's), swap-ins submitted whose step reply has
  // not gone yet, and step replies waiting for their swap-in's submission; by transfer id.
  std::optional<attach_request> attached;
  std::unordered_map<uint64_t, swap_in_signal> signals;
  std::unordered_map<uint64_t, std::function<void(const swap_in_signal&)>> parked;
};

using self_ptr = caf::stateful_actor<server_state>*;

/// A call being answered: where its reply goes, and the call.
struct ctx {
  reply_to to;
  call c;
};

// -- replies (server_actor.cpp) ------------------------------------------------------------------

/// The server's clock in virtual nanoseconds since it started (the replies' `now_ns`).
int64_t now_ns(self_ptr self);
/// Counts the call, tells the observers and hands the reply to the sink.
void answer(self_ptr self, const reply_to& to, msgpack::sbuffer& buf,
            std::optional<error_kind> err = std::nullopt);
/// Answers an error reply of `kind`.
void fail(self_ptr self, const reply_to& to, error_kind kind, const std::string& message);
/// A controller answer that the engine's session refused (a fault of the server's own): counted,
/// and written to stderr.
void note_session_fault(self_ptr self, const std::string& what);

// -- engines and the controller (server_actor.cpp) -----------------------------------------------

/// The controller of stack `stack`.
const cache_controller_actor& controller_of(self_ptr self, uint32_t stack);
/// Sends `c` to stack `stack` under the next server-wide step number; `then` gets the grant.
void send_commit(self_ptr self, uint32_t stack, commit c, std::function<void(const grant&)> then);
/// Releases every request of `engine` and forgets it.
void drop_engine(self_ptr self, uint64_t engine);

// -- session verbs: hello, ping, bye, stats (session_verbs.cpp) ---------------------------------

/// Why a hello's or attach's model or block size is not the server's: (field, theirs, ours).
struct model_mismatch_field {
  std::string field, theirs, ours;
};
std::optional<model_mismatch_field> model_mismatch(const call& c, const server_settings& s);

void do_hello(self_ptr self, ctx& x);
void do_ping(self_ptr self, ctx& x);
void do_bye(self_ptr self, ctx& x, engine_state& e, uint64_t engine);
void do_stats(self_ptr self, ctx& x);
/// This shard's part of `stats`: engines, live requests, its sessions' invariant violations,
/// then its counters' calls and errors (verb and error_kind order); do_stats sums every shard's.
std::vector<uint64_t> stats_part(self_ptr self);

// -- request verbs: lookup, allocate, wait (request_verbs.cpp) ----------------------------------

void do_lookup(self_ptr self, ctx& x, const engine_state& e);
void do_allocate(self_ptr self, ctx& x, engine_state& e, uint64_t engine);
void do_wait(self_ptr self, ctx& x, engine_state& e);

// -- step verbs: probe, step and its shorthands (step_verbs.cpp) --------------------------------

void do_probe(self_ptr self, ctx& x, engine_state& e);
/// step, commit, save, free, preempt, finish.
void do_step(self_ptr self, ctx& x, engine_state& e, uint64_t engine);

// -- real mode: the engine's tensors, bench_swap, swap-in signals (real_mode_verbs.cpp) ---------

/// Why hello must be refused for its `tensors`, if it must; attaches them at the first hello.
std::optional<std::string> attach_tensors(self_ptr self, const call& c, uint32_t version);
/// `attach`: the engine's tensors from a process that registers no engine (a vLLM worker).
void do_attach(self_ptr self, ctx& x);
void do_bench_swap(self_ptr self, ctx& x);
/// A swap-in was submitted on the device: the step reply parked for it goes now.
void on_swap_in_submitted(self_ptr self, swap_in_signal sig);

}  // namespace kvtier::serve
