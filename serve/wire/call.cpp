#include "serve/wire/call.hpp"

namespace kvtier::serve {

namespace {

const char* const verb_names[verb_count] = {"hello", "lookup", "allocate", "wait",  "probe",
                                            "step",  "commit", "save",     "free",  "preempt",
                                            "finish", "stats", "ping",     "bye",
                                            "bench_swap"};
const char* const error_names[error_kind_count] = {
  "malformed", "unknown_op", "too_large", "unauthorized", "version",
  "model_mismatch", "not_registered", "bad_request", "shutting_down", "config_mismatch"};

}  // namespace

const char* verb_name(verb v) { return verb_names[static_cast<int>(v)]; }

std::optional<verb> verb_of(std::string_view name) {
  for (int i = 0; i < verb_count; ++i)
    if (name == verb_names[i])
      return static_cast<verb>(i);
  return std::nullopt;
}

const char* error_name(error_kind k) { return error_names[static_cast<int>(k)]; }

std::optional<error_kind> error_kind_of(std::string_view name) {
  for (int i = 0; i < error_kind_count; ++i)
    if (name == error_names[i])
      return static_cast<error_kind>(i);
  return std::nullopt;
}

}  // namespace kvtier::serve
