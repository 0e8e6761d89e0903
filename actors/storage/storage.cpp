#include "actors/storage/storage.hpp"

#include <memory>
#include <string>

#include "actors/storage/storage_state.hpp"
#include "core/check.hpp"

namespace kvtier {

namespace storage_impl {
namespace {

// The behaviour table: every handler brings the pool to the present (sync) before it looks at
// anything, then hands the message to the file that serves it.
storage_actor::behavior_type storage_behavior(self_ptr self, storage_options options) {
  auto& st = self->state;
  st.options = options;
  st.backend = options.backend;
  st.report.backend = st.backend ? st.backend->name() : "model";
  KVTIER_ASSERT(!st.backend || st.backend->nodes() == options.nodes);
  // Real bytes take real room from the moment a put is accepted (docs/design.md "Capacity").
  storage_pool_policy pool = options.pool;
  // The memory backend keeps the model's figures exactly (it answers inline, nothing is ever
  // in flight there), so only the asynchronous backends count from acceptance.
  if (st.backend && st.backend->asynchronous())
    pool.count_from = storage_capacity_count::accepted;
  st.index = std::make_unique<storage_index>(options.capacity_blocks, options.nodes, pool);
  if (options.faults.any())
    st.faults = std::make_unique<fault_plan>(options.faults, options.nodes);
  st.node_epoch.assign(options.nodes, 0);
  st.slow.assign(options.nodes, 0);
  for (uint32_t n = 0; n < options.nodes; ++n) {
    st.read_link.push_back(st.links.links().add_link("storage" + std::to_string(n) + ".read",
                                                     options.read_gbps));
    st.write_link.push_back(st.links.links().add_link("storage" + std::to_string(n) + ".write",
                                                      options.write_gbps));
  }
  return {
    [=](exists_query& q) -> caf::result<exists_reply> {
      sync(self);
      return serve_exists(self, q);
    },
    [=](caf::get_atom, storage_io& req) -> caf::result<storage_io_reply> {
      sync(self);
      return serve_get(self, req);
    },
    [=](caf::put_atom, storage_io& req) -> caf::result<storage_io_reply> {
      sync(self);
      return serve_put(self, req);
    },
    [=](storage_release& r) { release_lease(self, r); },
    [=](report_atom) -> storage_report {
      sync(self);
      return report_of(self);
    },
    [=](wake_atom, uint64_t) { sync(self); },
    [=](storage_backend_done& d) {
      sync(self);
      on_backend_done(self, d);
    },
    [=](rebuild_atom) -> caf::result<uint64_t> { return start_rebuild(self); },
  };
}

}  // namespace
}  // namespace storage_impl

storage_actor spawn_storage(caf::actor_system& sys, const storage_options& options) {
  return sys.spawn(storage_impl::storage_behavior, options);
}

}  // namespace kvtier
