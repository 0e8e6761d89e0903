#pragma once

// The storage actor's state and the functions its files share (storage.hpp says what the actor
// does). One file per job: storage.cpp the behaviour table, storage_requests.cpp the service of
// exists / get / put and leases, storage_media.cpp the modelled media and the clock,
// storage_faults.cpp the injected faults, storage_backend_io.cpp a byte-carrying backend's I/O,
// its completions and the rebuild. All of it lives in storage_impl: no other actor sees it.

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "actors/messages.hpp"
#include "actors/storage/storage.hpp"
#include "actors/timed_links.hpp"
#include "model/storage/fault_plan.hpp"
#include "model/storage/storage_index.hpp"
#include "storage/storage_backend.hpp"

#include <absl/container/flat_hash_map.h>

namespace kvtier::storage_impl {

struct pending_io {
  // remove: an eviction's delete (asynchronous backends); reconcile: a listing after a reconnect
  enum class kind : uint8_t { exists, get, put, remove, reconcile } what = kind::exists;
  std::vector<uint64_t> keys;
  uint32_t flows = 0;  // still running
  int64_t requested_ns = 0;
  bool shadow = false;  // the model's timing of a request a real backend serves (no reply)
  // byte-carrying backends
  std::vector<uint64_t> hashes;
  std::vector<std::vector<uint8_t>> payloads;  // put
  std::vector<payload_destination> into;       // get: where each key's bytes go
  std::vector<uint8_t> leased;  // get: which keys it leased before reading
  // put: per key written, whether an injected fault fails it, and its node's loss count when the
  // write began (a loss since then means the write went with the node)
  std::vector<uint8_t> fail;
  std::vector<uint64_t> epochs;
  caf::typed_response_promise<exists_reply> exists_promise;
  caf::typed_response_promise<storage_io_reply> io_promise;
};

struct storage_state {
  static inline const char* name = "storage";
  storage_options options;
  std::unique_ptr<storage_index> index;
  timed_links links;
  std::vector<link_model::link_id> read_link, write_link;  // per node
  std::map<link_model::flow_id, uint64_t> flow_to_io;
  std::map<uint64_t, pending_io> ios;
  std::map<uint64_t, std::vector<uint64_t>> leases;  // by lease id: the keys a get leased
  uint64_t next_io = 1;
  storage_report report;
  std::shared_ptr<storage_backend> backend;
  absl::flat_hash_map<uint64_t, uint64_t> hash_of;  // byte backends: storage key -> block hash
  std::vector<caf::typed_response_promise<uint64_t>> rebuilds;
  std::unique_ptr<fault_plan> faults;
  std::vector<uint64_t> node_epoch;  // losses per node
  std::vector<uint8_t> slow;         // per node: inside a slow window
  int64_t fault_wake = link_model::never;  // the fault timer set, if any
  // A real backend's failures (storage_failures.cpp): deletes not yet done, deletes that could
  // not run (key -> block hash; retried), the reconnects seen, a reconcile running and the keys
  // written since it began, whether a reconcile must run again (its listing was incomplete), when
  // owed deletes and incomplete listings may next be retried (the backend clock's ticks), what
  // was said already.
  uint64_t deletes_in_flight = 0;
  absl::flat_hash_map<uint64_t, uint64_t> owed_deletes;
  uint64_t reconnects_seen = 0;     // reconnects a listing was started for
  uint64_t reconnects_retried = 0;  // reconnects owed deletes were retried for
  bool reconciling = false;
  bool reconcile_again = false;
  absl::flat_hash_map<uint64_t, uint8_t> written_since_listing;
  int64_t next_retry_at = 0;
  int64_t followup_at = 0;  // a second reconcile after one a reconnect started (0: none due)
  bool said_dropped = false, said_no_room = false, said_lost = false, said_owed = false,
       said_orphans = false;
};

using self_ptr = storage_actor::stateful_pointer<storage_state>;

// -- the modelled media and the clock (storage_media.cpp) --

int64_t now_of(self_ptr self);
uint64_t start_io(self_ptr self, pending_io io, uint64_t bytes_each, bool write);
void grant_exists_leases(storage_state& st, const std::vector<uint64_t>& keys, size_t leading);
void add_service_time(self_ptr self, const pending_io& io, int64_t done = -1);
void sync(self_ptr self);

// -- injected faults (storage_faults.cpp) --

bool get_fails(storage_state& st);
bool write_survived(storage_state& st, const pending_io& io, size_t i);
void apply_fault(self_ptr self, const fault_plan::event& e);
void arm_fault_wake(self_ptr self);

// -- byte-carrying backends (storage_backend_io.cpp) --

void start_backend(self_ptr self, uint64_t id);
void remove_from_backend(self_ptr self, const std::vector<uint64_t>& victims);
void delete_blocks(self_ptr self, std::vector<block_ref> blocks);
int64_t backend_clock_now();
void on_backend_done(self_ptr self, storage_backend_done& d);
caf::result<uint64_t> start_rebuild(self_ptr self);

// -- a real backend's failures, said and reconciled (storage_failures.cpp) --

void say_once(bool& said, const std::string& what);
void check_reconnects(self_ptr self);
void on_reconciled(self_ptr self, pending_io& io, const storage_backend_done& d);
void on_removed(self_ptr self, const pending_io& io, const storage_backend_done& d);

// -- requests (storage_requests.cpp) --

caf::result<exists_reply> serve_exists(self_ptr self, exists_query& q);
caf::result<storage_io_reply> serve_get(self_ptr self, storage_io& req);
caf::result<storage_io_reply> serve_put(self_ptr self, storage_io& req);
void release_lease(self_ptr self, const storage_release& r);
storage_report report_of(self_ptr self);

}  // namespace kvtier::storage_impl
