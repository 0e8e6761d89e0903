#include "sim/report/fault_report.hpp"

namespace kvtier {

using nlohmann::json;

json faults_summary(const full_result& r, const fault_options& f) {
  const storage_report& s = r.storage;
  json out = {
    {"configured", f.any()},
    {"injected", {{"node_losses", s.node_losses}, {"slow_link_windows", s.slow_windows},
                  {"get_failures", s.get_failures}, {"put_failures", s.put_failures}}},
    {"outcomes", {{"node_returns", s.node_returns}, {"blocks_lost", s.keys_lost + s.blocks_lost},
                  {"puts_refused_node_down", s.puts_node_down},
                  {"puts_lost_in_flight", s.puts_lost}, {"reads_lost_after_answer", s.reads_lost},
                  {"failed_loads", r.controller.failed_loads},
                  {"failed_requests", 0}}},
  };
  if (f.any())
    out["seed"] = f.seed;  // without faults the seed drew nothing: the summary does not vary by it
  return out;
}

std::vector<std::string> storage_failure_warnings(const storage_report& s) {
  std::vector<std::string> out;
  if (s.puts_dropped > 0)
    out.push_back("storage: " + std::to_string(s.puts_dropped) + " blocks could not be stored (" +
                  (s.put_error.empty() ? std::string("node down") : s.put_error) +
                  "): storage.puts_dropped");
  if (s.puts_no_room > 0)
    out.push_back("storage: " + std::to_string(s.puts_no_room) + " blocks were not stored: their "
                  "node's capacity was all in blocks being written or read: "
                  "storage.puts_no_room");
  if (s.blocks_lost > 0)
    out.push_back("storage: the " + s.backend + " backend lost " +
                  std::to_string(s.blocks_lost) + " indexed blocks (a node came back without "
                  "them); they left the index: storage.blocks_lost");
  if (s.orphans_removed > 0)
    out.push_back("storage: reconciles deleted " + std::to_string(s.orphans_removed) +
                  " blocks the " + s.backend + " backend held outside the index (deletes that "
                  "failed while a node was out of reach): storage.deletes.orphans_removed");
  if (s.deletes_owed > 0)
    out.push_back("storage: " + std::to_string(s.deletes_owed) + " deletes could not run by the "
                  "end (their node out of reach): the " + s.backend + " backend may hold those "
                  "blocks beyond the pool's capacity until a pool on it reconciles: "
                  "storage.deletes.owed");
  if (s.auth_failures > 0 || s.tls_failures > 0)
    out.push_back("storage: " + std::to_string(s.auth_failures) + " connections were refused "
                  "their credentials and " + std::to_string(s.tls_failures) + " TLS handshakes "
                  "failed: storage.auth_failures, storage.tls_failures");
  return out;
}

json pool_summary(const full_result& r, const storage_pool_policy& pool) {
  const storage_report& s = r.storage;
  return {
    {"eviction", to_string(pool.eviction)},
    {"lease_ms", static_cast<double>(pool.lease_ns) / 1e6},
    {"put_present", s.put_present},
    {"put_in_flight", s.put_in_flight},
    {"exists_leases", s.exists_leases},
    {"lease_deferrals", s.lease_deferrals},
    {"eviction_batches", s.eviction_batches},
    {"invariants", {{"checked", s.invariant_checked}, {"violations", s.invariant_violations}}},
  };
}

std::vector<std::string> storage_end_problems(const storage_report& s) {
  std::vector<std::string> out = s.invariant_messages;
  auto leak = [&](uint64_t n, const char* what) {
    if (n > 0)
      out.push_back("storage: " + std::to_string(n) + " " + what + " at the end of the replay");
  };
  leak(s.open_leases, "get leases still open");
  leak(s.leased_keys, "blocks still leased");
  leak(s.pending, "requests still unanswered");
  leak(s.writes_in_flight, "puts still in flight");
  return out;
}

}  // namespace kvtier
