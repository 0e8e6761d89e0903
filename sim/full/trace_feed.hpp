#pragma once

// The front end's feed over trace files: the merged readers in arrival order, each request
// mapped onto cache blocks when it arrives. Reader and mapping errors end the feed as an
// input_problem (file, line, field), which the front end answers its run request with.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/front_end/request_feed.hpp"
#include "sim/request_blocks.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

class trace_feed : public request_feed {
 public:
  trace_feed(std::vector<std::unique_ptr<trace_source>> sources, uint32_t block_size,
             std::vector<std::string> files);

  bool next(trace_request& out) override;
  bool blocks_of(const trace_request& r, std::vector<cache_block>& out) override;
  std::optional<input_problem> problem() const override { return problem_; }

  const trace_merger& merger() const { return merger_; }
  /// Requests read per file, and in all.
  const std::vector<uint64_t>& per_file() const { return per_file_; }
  uint64_t read() const { return read_; }
  /// Wall seconds spent reading (not deterministic).
  double parse_s() const { return parse_s_; }

 private:
  trace_merger merger_;
  request_blocks mapper_;
  std::vector<uint64_t> per_file_;
  uint64_t read_ = 0;
  double parse_s_ = 0;
  std::optional<input_problem> problem_;
};

}  // namespace kvtier
