#pragma once

// The front end's feed over trace files: the merged readers in arrival order, each request
// mapped onto cache blocks when it arrives. Reader and mapping errors end the feed as an
// input_problem (file, line, field), which the front end answers its run request with.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/front_end/request_feed.hpp"
#include "sim/request_blocks.hpp"
#include "sim/trace/trace_reader.hpp"
#include "sim/trace/trace_totals.hpp"

namespace kvtier {

class trace_feed : public request_feed {
 public:
  /// A request whose KV needs more than `max_device_blocks` blocks fits no instance: it will be
  /// rejected, so its blocks are counted but not built (one claim of 4e9 tokens costs nothing).
  /// Every request's times, scaled by `time_scale`, must stay within virtual time's limits.
  trace_feed(std::vector<std::unique_ptr<trace_source>> sources, std::vector<std::string> files,
             request_blocks mapper, uint32_t block_size, uint32_t max_device_blocks,
             double time_scale);

  bool next(trace_request& out) override;
  bool blocks_of(const trace_request& r, std::vector<cache_block>& out) override;
  std::optional<input_problem> problem() const override { return problem_; }

  const trace_merger& merger() const { return merger_; }
  /// Requests read per file, and in all.
  const std::vector<uint64_t>& per_file() const { return per_file_; }
  uint64_t read() const { return read_; }
  /// The trace as read: tokens of every request, and the blocks they list.
  const trace_totals& totals() const { return totals_; }
  /// Wall seconds spent reading (not deterministic).
  double parse_s() const { return parse_s_; }

 private:
  trace_merger merger_;
  std::vector<std::string> files_;
  request_blocks mapper_;
  uint32_t block_size_;
  uint32_t max_device_blocks_;
  double time_scale_;
  std::vector<uint64_t> per_file_;
  trace_totals totals_;
  uint64_t read_ = 0;
  double parse_s_ = 0;
  std::optional<input_problem> problem_;
};

}  // namespace kvtier
