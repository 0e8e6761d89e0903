#pragma once

// What the scheduler core (scheduler_core.hpp) asks its actor to do: messages to the cache
// controller, the transfer engine, storage and the GPU compute, timers to itself, and answers to
// the front end. The actor carries them out in the order the core made them: a virtual replay
// runs its actors in the order their messages were sent (core/sim_clock.hpp), so that order is
// part of every result. Each reply goes back to the core with the tag its order carried.

#include <cstdint>
#include <variant>
#include <vector>

#include "model/messages.hpp"

namespace kvtier {

/// Which core call a transfer's reply goes to.
enum class transfer_use : uint8_t {
  background,       ///< none: nobody waits for it (the D2H before a store)
  handoff_store,    ///< PD prefill, storage handoff: the request's blocks are written
  output_store,     ///< cache.output_caching: a finished request's blocks are written
  handoff_load,     ///< PD decode, storage handoff: the blocks are read into host memory
  handoff_swap_in,  ///< ... and into the request's preallocated device blocks
};

struct engine_order {
  transfer t;
  transfer_use use = transfer_use::background;
  request_id req = 0;
};

/// Which core call an exists reply goes to.
enum class exists_use : uint8_t {
  handoff_visible,  ///< PD prefill, storage handoff: are the written blocks visible yet
  drop_saved,       ///< PD decode: are a dropped victim's saved blocks visible yet
  handoff_stored,   ///< PD prefill, storage handoff: which of its hits storage holds already
};

struct storage_order {
  exists_query query;
  exists_use use = exists_use::handoff_visible;
  request_id req = 0;
};

enum class timer_kind : uint8_t {
  plan,      ///< plan once every event of this instant has been handled (step 0)
  step_end,  ///< step `id` ends
  handoff,   ///< PD: request `id`'s KV has arrived, or storage is asked again about it
};

struct timer_order {
  timer_kind kind = timer_kind::plan;
  int64_t at_ns = 0;  ///< virtual time it fires at (a plan tick: now)
  uint64_t id = 0;
};

/// The front end's answer to request `done.req`.
struct answer_order {
  request_done done;
};

/// To the controller: probe, commit, arrival (a readmission's too). To the GPU: compute_request.
using scheduler_order = std::variant<probe, commit, arrival, engine_order, storage_order,
                                     compute_request, timer_order, answer_order>;
using scheduler_orders = std::vector<scheduler_order>;

}  // namespace kvtier
