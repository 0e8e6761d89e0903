#include "model/session/request_state.hpp"

namespace kvtier::session {

namespace {

constexpr int state_count = 4;
constexpr int event_count = 8;
using S = req_state;
constexpr transition no{};
constexpr transition to(S s) { return {true, s}; }
constexpr transition leaves{true, std::nullopt};

// [state][event], events in req_event's order:
//   loaded      admitted        granted         refused     computed    grown       preempted   finished
constexpr transition table[state_count][event_count] = {
  {to(S::waiting), no,             no,             no,         no,         no,         no,         no},
  {no,             to(S::admitting), no,           no,         no,         no,         no,         leaves},
  {no,             no,             to(S::running), to(S::waiting), no,     no,         no,         no},
  {no,             no,             no,             no,         to(S::running), to(S::running),
   to(S::waiting), leaves},
};

// The step list an event comes from, as the engine wrote it.
const char* list_of(req_event e) {
  switch (e) {
    case req_event::admitted: return "admits";
    case req_event::computed: return "computed";
    case req_event::grown: return "grows";
    case req_event::preempted: return "preempted";
    case req_event::finished: return "finished";
    default: return nullptr;
  }
}

}  // namespace

const char* state_name(req_state s) {
  static const char* const names[state_count] = {"loading", "waiting", "admitting", "running"};
  return names[static_cast<int>(s)];
}

const char* event_name(req_event e) {
  static const char* const names[event_count] = {"loaded",   "admitted", "granted",   "refused",
                                                  "computed", "grown",    "preempted", "finished"};
  return names[static_cast<int>(e)];
}

transition next_state(std::optional<req_state> from, req_event e) {
  if (!from)
    return no;
  return table[static_cast<int>(*from)][static_cast<int>(e)];
}

std::string refusal(uint64_t req, req_event e, std::optional<req_state> from) {
  std::string who = "request " + std::to_string(req);
  const char* list = list_of(e);
  if (!list)  // the controller's answers: only a fault of the server's own can make them illegal
    return who + ": '" + event_name(e) + "' while it is "
           + (from ? state_name(*from) : "not allocated");
  who += std::string(" in '") + list + "'";
  switch (e) {
    case req_event::admitted:
      return who + " is not waiting (allocated, loaded and not running)";
    case req_event::finished:
      if (from == req_state::loading)
        return who + " is still loading from storage ('wait' first)";
      if (from == req_state::admitting)
        return who + " has an admission not yet answered";
      return who + " is not allocated";
    default:
      return who + " is not running";
  }
}

}  // namespace kvtier::session
