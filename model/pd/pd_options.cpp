#include "model/pd/pd_options.hpp"

namespace kvtier {

const char* to_string(pd_role r) {
  switch (r) {
    case pd_role::mixed: return "mixed";
    case pd_role::prefill: return "prefill";
    case pd_role::decode: return "decode";
  }
  return "?";
}

const char* to_string(pd_transfer t) {
  return t == pd_transfer::storage ? "storage" : "direct";
}

const char* to_string(handoff_failure_rule r) {
  return r == handoff_failure_rule::recompute ? "recompute" : "error";
}

uint16_t handoff_error_code(pd_transfer t) {
  return t == pd_transfer::storage ? 502 : 500;
}

}  // namespace kvtier
