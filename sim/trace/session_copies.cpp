#include "sim/trace/session_copies.hpp"

#include "sim/trace/trace_ids.hpp"

namespace kvtier {

namespace {

constexpr uint64_t copy_space_salt = 0x636f7079ULL;

// A session id is (file index + 1) << 32 | n (docs/traces.md, "Sessions"): bits 48 and up are
// free while there are fewer than 65535 files.
uint64_t copied_session(uint64_t session, uint32_t copy) {
  return session == 0 ? 0 : session | (uint64_t{copy} << 48);
}

class copy_source : public trace_source {
 public:
  copy_source(std::unique_ptr<trace_source> inner, uint32_t copy)
      : inner_(std::move(inner)), copy_(copy) {}

  bool next(trace_request& out) override {
    if (!inner_->next(out))
      return false;
    // Trace ids mean something only within their space (docs/traces.md, "Id spaces"): a space
    // of the copy's own makes its blocks distinct from the original's and from other copies'.
    // Token ids carry their content and stay shared: copies of a token trace repeat it.
    if (!out.ids.empty())
      out.id_space = splitmix64(splitmix64(out.id_space ^ copy_space_salt) + copy_);
    out.session = copied_session(out.session, copy_);
    out.parent_session = copied_session(out.parent_session, copy_);
    return true;
  }

  uint64_t skipped() const override { return inner_->skipped(); }
  trace_format format() const override { return inner_->format(); }
  uint64_t bytes_read() const override { return inner_->bytes_read(); }
  uint64_t bytes_total() const override { return inner_->bytes_total(); }

 private:
  std::unique_ptr<trace_source> inner_;
  uint32_t copy_;
};

}  // namespace

std::unique_ptr<trace_source> session_copy(std::unique_ptr<trace_source> source, uint32_t copy) {
  if (copy == 0)
    return source;
  return std::make_unique<copy_source>(std::move(source), copy);
}

}  // namespace kvtier
