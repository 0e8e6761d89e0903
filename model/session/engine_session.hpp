#pragma once

// One engine's session with a cache controller, without the actor (docs/design.md, "Beside an
// engine"), as controller_core and scheduler_core are for theirs. The engine names its own
// requests; the session maps them onto the controller's ids, keeps each one's state
// (request_state.hpp) and checks every step against those states before anything of it reaches
// the controller, so that nothing an engine sends can break the controller's promises (a grown
// request is admitted, an admitted one is not admitted again). A refusal comes back in the words
// of the error reply and changes nothing; so does a controller answer that does not fit the
// state (which only a fault of the server's own could cause).
//
// `kvtier serve`'s server actor (serve/server/) holds one per registered engine and only moves
// messages and replies. Nothing here is shared between engines: a session is one engine's, its
// controller may be one of several.
//
// With the engine-owned device tier (device_owner::engine, protocol version 3) the session also
// keeps each running request's table of the engine's device block ids and what the engine's
// device blocks hold (engine_blocks.cpp).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/cache/invariants.hpp"
#include "model/messages/controller.hpp"
#include "model/session/device_owner.hpp"
#include "model/session/request_state.hpp"

namespace kvtier::session {

struct session_options {
  device_owner owner = device_owner::kvtier;
  uint32_t block_size = 64;
  uint32_t device_blocks = 0;  ///< the device tier; the engine's block ids lie below it
};

/// A `wait` parked until its request has loaded: where its reply goes.
struct parked_call {
  uint64_t conn = 0;
  uint64_t id = 0;
  std::chrono::steady_clock::time_point since;
};

struct session_request {
  request_id global = 0;  ///< the controller's id
  req_state state = req_state::loading;
  uint32_t prefetched = 0;  ///< the controller's ready: blocks storage gave it
  uint32_t available = 0;   ///< ... and the device blocks available then
  uint32_t prompt_blocks = 0;
  std::vector<parked_call> waiters;  ///< only while loading
  /// device_owner::engine: the engine's device block ids of its blocks, as admits and grows gave
  /// them, and its prompt's blocks under the server's names.
  std::vector<uint32_t> device_table;
  std::vector<cache_block> names;
};

/// Every field of a session, for the invariant checks and for tests that corrupt it.
struct session_state {
  std::unordered_map<uint64_t, session_request> requests;  ///< by the engine's id
  std::unordered_map<request_id, uint64_t> engine_ids;      ///< the controller's id -> engine's
  uint64_t last_step = 0;  ///< the engine's last step number, `step`'s and the shorthands' alike
  /// device_owner::engine: the name each of the engine's device blocks holds, as its `computed`
  /// reports named them, and how many of its blocks hold each name.
  std::unordered_map<uint32_t, block_hash> device_contents;
  std::unordered_map<block_hash, uint32_t> device_copies;
};

/// One step's block work as the engine sent it: its own request ids, its device block ids
/// (commit::admit_blocks and grow_blocks, device_owner::engine) and the device blocks whose
/// contents it dropped.
struct engine_step {
  std::optional<uint64_t> number;  ///< none: a shorthand, numbered after the engine's last step
  commit work;
  std::vector<uint64_t> evicted;
};

/// A step checked and applied: its number (the engine's) and the commit for the controller.
struct begun_step {
  uint64_t number = 0;
  commit work;  ///< the controller's request ids
};

/// A step's grant in the engine's terms.
struct settled_step {
  std::vector<uint64_t> admits;          ///< each admission's engine request, in the grant's order
  std::vector<uint32_t> prompt_blocks;   ///< ... and its prompt's blocks
  std::vector<uint64_t> failed_grows;    ///< engine requests; 0 for one that has left since
  std::vector<std::vector<uint32_t>> load_blocks;  ///< device_owner::engine: per admission
};

/// What an engine that leaves still had: requests to finish now, and ones still loading (to
/// finish once their loads land).
struct released_requests {
  std::vector<request_id> finished;
  std::vector<request_id> loading;
  /// device_owner::engine: the names the engine's device held; its device goes with it.
  std::vector<block_hash> device_dropped;
};

class engine_session {
 public:
  explicit engine_session(session_options o = {}) : options_(o) {}

  device_owner owner() const { return options_.owner; }
  std::size_t size() const { return st_.requests.size(); }
  uint64_t last_step() const { return st_.last_step; }
  /// Null when the engine has no such request.
  const session_request* find(uint64_t req) const;
  std::optional<uint64_t> engine_id(request_id global) const;
  /// A `wait` parked: the engine is not silent.
  bool has_waiters() const;

  // -- allocate, ready, wait ----------------------------------------------------------------------

  /// A new request, loading, under the controller's id `global`, with its prompt's blocks (under
  /// the server's names); refused when `req` is allocated already.
  std::optional<std::string> allocate(uint64_t req, request_id global,
                                      const std::vector<cache_block>& blocks);
  /// The controller's ready for `global`: loading -> waiting. The calls parked in `wait` for it
  /// are moved to `woken`, to be answered now.
  std::optional<std::string> loaded(const ready& r, std::vector<parked_call>& woken);
  /// `wait` for `req`: parks `c` while the request loads (true); false when it has loaded (or
  /// is not allocated).
  bool park_until_loaded(uint64_t req, const parked_call& c);

  // -- steps --------------------------------------------------------------------------------------

  /// Checks a step against the requests' states, in the controller's order (computed, finished,
  /// preempted, grows, admits), and its device block ids against the tables; applies it only
  /// when all of it fits. On success `out` holds what goes to the controller.
  std::optional<std::string> begin_step(const engine_step& s, begun_step& out);
  /// The grant of step `s` (as begin_step got it): its admissions go running or back to waiting,
  /// the engine-owned tables follow. Refused, changing nothing, when an admission is not this
  /// engine's request in state admitting.
  std::optional<std::string> end_step(const engine_step& s, const grant& g, settled_step& out);

  // -- the engine leaves --------------------------------------------------------------------------

  /// Empties the session.
  released_requests release_all();

  // -- checks -------------------------------------------------------------------------------------

  /// The session's invariants (engine_session.cpp lists them), recomputed from scratch.
  void check(invariant_report& report) const;
  session_state& state_for_test() { return st_; }

 private:
  using overlay = std::unordered_map<uint64_t, std::optional<req_state>>;
  std::optional<std::string> check_states(commit& work, overlay& after) const;
  // engine_blocks.cpp: device_owner::engine
  std::optional<std::string> check_device_tables(const commit& c) const;
  std::optional<std::string> check_evictions(const engine_step& s) const;
  void note_device_contents(const engine_step& s, commit& work);
  void forget_device_block(uint32_t id, bool drop, commit& work);
  std::vector<std::vector<uint32_t>> settle_device_tables(const commit& c, const grant& g,
                                                          const std::vector<uint64_t>& admitted,
                                                          const std::vector<uint64_t>& failed);

  session_options options_;
  session_state st_;
};

}  // namespace kvtier::session
