#pragma once

// A fluid model of the links that carry KV blocks: PCIe per direction, the PCIe total when both
// directions run (duplex), the host's network link to storage, each storage node's media.
//
// A flow is a sequence of operations; each operation first waits its latency (launch, protocol
// round trip), then moves its bytes across every link of the flow at once. Links are shared
// fairly: a link of capacity C carrying n moving flows gives each C / n, and a flow moves at the
// smallest share among its links. A flow may also be capped (one stream's rate: a lone request
// cannot use a whole node's media): on each link, flows capped below the fair share keep their cap
// and leave the rest to the others (water-filling per link), and a flow moves at the smallest of
// its cap and its links' shares. Without caps a link's share is exactly C / n. Rates change only when a flow starts or finishes moving, so
// between those events time advances in closed form: the model is exact, event-driven and
// deterministic (integer nanoseconds; a completion lands on the first whole nanosecond at which
// its bytes are through).

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kvtier {

class link_model {
 public:
  using link_id = uint32_t;
  using flow_id = uint64_t;
  static constexpr int64_t never = std::numeric_limits<int64_t>::max();

  struct op {
    int64_t latency_ns = 0;
    uint64_t bytes = 0;
  };

  /// One finished operation.
  struct op_done {
    flow_id flow = 0;
    uint32_t index = 0;  ///< position in the flow's operations
    bool last = false;   ///< the flow's last operation: the flow is done
    int64_t at = 0;
  };

  struct link_stats {
    std::string name;
    double gbps = 0;
    uint64_t bytes = 0;
    int64_t busy_ns = 0;  ///< time with at least one flow moving bytes over it
    uint64_t flows = 0;
  };

  /// Adds a link of `gbps` GB/s (1e9 bytes per second).
  link_id add_link(std::string name, double gbps);
  /// Starts a flow at `now` (which must not precede the last advance). It uses every link in
  /// `links` for its bytes, at most `cap_gbps` GB/s (0: no cap). Returns its id.
  flow_id start(int64_t now, std::vector<link_id> links, std::vector<op> ops, double cap_gbps = 0);
  /// Changes a link's bandwidth from `now` on (a slow-link fault); the caller advanced to `now`
  /// first. Flows on it move at the new share from then.
  void set_gbps(link_id link, double gbps, int64_t now);
  /// Moves time to `now`, appending every operation that finished on the way, in time order
  /// (ties: by flow id).
  void advance(int64_t now, std::vector<op_done>& out);
  /// When the next operation finishes or the next latency ends (never when idle).
  int64_t next_event() const;

  const std::vector<link_stats>& stats() const { return stats_; }
  int64_t time() const { return now_; }

 private:
  struct flow {
    flow_id id = 0;
    std::vector<link_id> links;
    std::vector<op> ops;
    uint32_t index = 0;
    bool moving = false;     // past the latency of its current op
    int64_t latency_end = 0;
    double remaining = 0;    // bytes of the current op still to move
    double rate = 0;         // bytes per ns while moving
    double cap = std::numeric_limits<double>::infinity();  // bytes per ns
  };
  double share_of(link_id l) const;
  void update_rates();
  int64_t finish_time(const flow& f) const;
  void settle(int64_t to);

  std::vector<double> capacity_;  // bytes per ns
  std::vector<uint32_t> moving_on_;
  std::vector<double> level_;  // per link: the water level of its moving flows (their fair share)
  uint64_t capped_ = 0;        // flows with a cap: none keeps the plain C / n
  std::vector<link_stats> stats_;
  std::vector<flow> flows_;
  flow_id next_id_ = 1;
  int64_t now_ = 0;
};

}  // namespace kvtier
