#pragma once

// The messages between kvtier's actors, by concern, as plain data (no CAF).
//
//   front end ── request_arrival ─► scheduler            (one per request, answered request_done)
//      │  prefix_lookup (router probe)        │
//      ▼                                      │  arrival ─► ready        exists ─► exists_reply
//   cache_controller ◄────────────────────────┘  probe ─► probe_reply  ─────────────────► storage
//      │   ▲                                     commit ─► grant                        ▲  │
//      │   │ transfer_done (per-layer times)                                            │  │
//      ▼   │                                                              get/put ─►    │  ▼
//   transfer_engine ─────────────────────────────────────────────────────────────────────┘
//
// The front end owns the workload (arrivals, sessions, routing to instances); each instance's
// scheduler owns its requests (batching, admission, chunked prefill, preemption); its cache
// controller owns the block index and decides every block move; its transfer engine moves bytes
// (modelled links or CUDA); storage keeps the L3 pool that every instance shares. One commit per
// scheduler step carries all block work of the step (never one message per block); the grant
// comes back once the step's inputs are in device memory, with the time each layer arrived, so
// the scheduler runs layer i's compute as soon as layer i is there.
//
// Every message is a plain struct of ids and integers; actors/messages.hpp gives each an
// inspect(), so it can cross a process boundary; the one exception is a storage get's
// destination (payload_destination), an address in this process. Times are virtual nanoseconds
// since the start of the replay (core/sim_clock.hpp).

#include "model/messages/compute.hpp"
#include "model/messages/controller.hpp"
#include "model/messages/front_end.hpp"
#include "model/messages/ids.hpp"
#include "model/messages/reports.hpp"
#include "model/messages/storage.hpp"
#include "model/messages/transfer.hpp"
