#pragma once

// Where a front end's requests come from: a trace read in recorded order (sim/ implements it
// over the trace readers), requests built in code, or a live client. The front end never sees
// files; a feed that meets bad input ends and says what was wrong, and the front end answers its
// run request with that problem, so the error reaches whoever started the run as a reply.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/block_hash.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

/// Bad input met by a feed: a trace line (file, line, field) or a setting (field names the key).
struct input_problem {
  enum class kind : uint8_t { trace = 0, config = 1 };
  kind what = kind::trace;
  std::string file;
  uint64_t line = 0;
  std::string field;
  std::string message;
};

class request_feed {
 public:
  virtual ~request_feed() = default;
  /// Fills `out` with the next request in recorded order (seq set) and returns true; false at the
  /// end, or on bad input (then problem() says what).
  virtual bool next(trace_request& out) = 0;
  /// Replaces `out` with the cache blocks of a request this feed gave; false on bad input.
  virtual bool blocks_of(const trace_request& r, std::vector<cache_block>& out) = 0;
  /// What was wrong, once next() or blocks_of() failed on bad input.
  virtual std::optional<input_problem> problem() const = 0;
};

}  // namespace kvtier
