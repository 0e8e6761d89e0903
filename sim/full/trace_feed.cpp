#include "sim/full/trace_feed.hpp"

#include <chrono>

#include "runtime/config/options.hpp"
#include "sim/full/time_checks.hpp"

namespace kvtier {

namespace {

input_problem problem_of(const trace_error& e) {
  return {input_problem::kind::trace, e.file(), e.line(), e.field(), e.detail()};
}

input_problem problem_of(const config_error& e) {
  return {input_problem::kind::config, "", 0, "", e.what()};
}

}  // namespace

trace_feed::trace_feed(std::vector<std::unique_ptr<trace_source>> sources,
                       std::vector<std::string> files, request_blocks mapper, uint32_t block_size,
                       uint32_t max_device_blocks, double time_scale)
    : merger_(std::move(sources)),
      files_(std::move(files)),
      mapper_(std::move(mapper)),
      block_size_(block_size),
      max_device_blocks_(max_device_blocks),
      time_scale_(time_scale),
      per_file_(merger_.sources().size(), 0) {
  // nop
}

bool trace_feed::next(trace_request& out) {
  if (problem_)
    return false;
  try {
    auto t0 = std::chrono::steady_clock::now();
    bool more = merger_.next(out);
    parse_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (more) {
      const auto& source = merger_.sources()[out.file];
      check_request_times(out, time_scale_, files_[out.file], source->format());
      ++per_file_[out.file];
      ++read_;
      totals_.input_tokens += out.input_tokens;
      totals_.output_tokens += out.output_tokens;
    }
    return more;
  } catch (const trace_error& e) {
    problem_ = problem_of(e);
  } catch (const config_error& e) {
    problem_ = problem_of(e);
  }
  return false;
}

bool trace_feed::blocks_of(const trace_request& r, std::vector<cache_block>& out) {
  if (problem_)
    return false;
  try {
    uint64_t kv_tokens = uint64_t{r.input_tokens} + (r.output_tokens > 0 ? r.output_tokens : 1) - 1;
    if ((kv_tokens + block_size_ - 1) / block_size_ > max_device_blocks_) {
      out.clear();
      totals_.blocks += mapper_.blocks_at_most(r);
      return true;
    }
    mapper_.map(r, out);
    totals_.blocks += out.size();
    return true;
  } catch (const trace_error& e) {
    problem_ = problem_of(e);
  } catch (const config_error& e) {
    problem_ = problem_of(e);
  }
  out.clear();
  return false;
}

}  // namespace kvtier
