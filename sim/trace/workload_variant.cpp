#include "sim/trace/workload_variant.hpp"

#include <cmath>
#include <queue>
#include <unordered_map>
#include <vector>

#include "sim/trace/trace_ids.hpp"

namespace kvtier {

namespace {

// Distinct streams of one seed: whether a session is kept, and how far it moves.
constexpr uint64_t keep_salt = 0x6b656570ULL;
constexpr uint64_t shift_salt = 0x7368696674ULL;

double uniform(uint64_t seed, uint64_t salt, uint64_t file, uint64_t key) {
  uint64_t h = splitmix64(splitmix64(splitmix64(seed ^ salt) ^ file) ^ key);
  return static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
}

struct pending {
  trace_request request;
  uint64_t order;  ///< read order: ties keep it
  bool operator>(const pending& o) const {
    return request.arrival_ns != o.request.arrival_ns ? request.arrival_ns > o.request.arrival_ns
                                                      : order > o.order;
  }
};

class variant_source : public trace_source {
 public:
  variant_source(std::unique_ptr<trace_source> inner, uint64_t file, workload_variant v)
      : inner_(std::move(inner)), file_(file), variant_(v) {}

  bool next(trace_request& out) override {
    // A shifted request may leave once nothing still unread can arrive before it: the next
    // unread request arrives no earlier than the last one read, and shifts only move later.
    while (!done_ && (ready_.empty() || ready_.top().request.arrival_ns > last_read_ns_))
      read_one();
    if (ready_.empty())
      return false;
    out = ready_.top().request;
    ready_.pop();
    return true;
  }

  uint64_t skipped() const override { return inner_->skipped(); }
  trace_format format() const override { return inner_->format(); }
  uint64_t bytes_read() const override { return inner_->bytes_read(); }
  uint64_t bytes_total() const override { return inner_->bytes_total(); }

 private:
  // The session a request's fate follows: its conversation's first session (a sub-agent
  // follows its parent, which must run for it to start), or the request itself.
  uint64_t root_of(const trace_request& r) {
    if (r.session == 0)
      return 0;
    uint64_t root = r.session;
    if (r.parent_session != 0) {
      auto it = roots_.find(r.parent_session);
      root = it == roots_.end() ? r.parent_session : it->second;
    }
    return roots_.emplace(r.session, root).first->second;
  }

  void read_one() {
    trace_request r;
    if (!inner_->next(r)) {
      done_ = true;
      return;
    }
    last_read_ns_ = r.arrival_ns;
    uint64_t root = root_of(r);
    // Sessionless requests are keyed by their line, which no session id can equal (sessions
    // carry the file number in their upper bits, lines never reach them).
    uint64_t key = root != 0 ? root : r.line;
    if (uniform(variant_.seed, keep_salt, file_, key) >= variant_.sample_fraction)
      return;
    double range_s = root != 0 ? variant_.session_shift_s : variant_.arrival_jitter_s;
    double shift = uniform(variant_.seed, shift_salt, file_, key) * range_s * 1e9;
    r.arrival_ns += static_cast<int64_t>(std::floor(shift));
    ready_.push({std::move(r), order_++});
  }

  std::unique_ptr<trace_source> inner_;
  uint64_t file_;  ///< the draws' file key: the file's index, its copy number above it
  workload_variant variant_;
  std::priority_queue<pending, std::vector<pending>, std::greater<pending>> ready_;
  std::unordered_map<uint64_t, uint64_t> roots_;
  int64_t last_read_ns_ = 0;
  uint64_t order_ = 0;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<trace_source> vary_workload(std::unique_ptr<trace_source> source,
                                            uint32_t file_index,
                                            const workload_variant& variant,
                                            uint32_t copy) {
  if (!variant.any())
    return source;
  uint64_t draw_key = uint64_t{file_index} | uint64_t{copy} << 32;
  return std::make_unique<variant_source>(std::move(source), draw_key, variant);
}

}  // namespace kvtier
