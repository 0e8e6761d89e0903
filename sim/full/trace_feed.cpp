#include "sim/full/trace_feed.hpp"

#include <chrono>

#include "sim/config/options.hpp"

namespace kvtier {

namespace {

input_problem problem_of(const trace_error& e) {
  return {input_problem::kind::trace, e.file(), e.line(), e.field(), e.detail()};
}

input_problem problem_of(const config_error& e) {
  return {input_problem::kind::config, "", 0, "", e.what()};
}

}  // namespace

trace_feed::trace_feed(std::vector<std::unique_ptr<trace_source>> sources, uint32_t block_size,
                       std::vector<std::string> files)
    : merger_(std::move(sources)), mapper_(block_size, files), per_file_(files.size(), 0) {
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
      ++per_file_[out.file];
      ++read_;
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
    mapper_.map(r, out);
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
