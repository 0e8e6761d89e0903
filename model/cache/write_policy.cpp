#include "model/cache/write_policy.hpp"

namespace kvtier {

const char* to_string(write_policy p) {
  switch (p) {
    case write_policy::write_through: return "write_through";
    case write_policy::write_through_selective: return "write_through_selective";
    case write_policy::write_back: return "write_back";
  }
  return "?";
}

const char* to_string(storage_write s) {
  switch (s) {
    case storage_write::always: return "always";
    case storage_write::on_host_evict: return "on_host_evict";
    case storage_write::never: return "never";
    case storage_write::write_through_selective: return "write_through_selective";
  }
  return "?";
}

std::optional<write_policy> parse_write_policy(const std::string& text) {
  for (auto p : {write_policy::write_through, write_policy::write_through_selective,
                 write_policy::write_back})
    if (text == to_string(p))
      return p;
  return std::nullopt;
}

std::optional<storage_write> parse_storage_write(const std::string& text) {
  for (auto s : {storage_write::always, storage_write::on_host_evict, storage_write::never,
                 storage_write::write_through_selective})
    if (text == to_string(s))
      return s;
  return std::nullopt;
}

write_decisions::write_decisions(write_policy p, uint32_t threshold_in, bool host, storage_write s,
                                 bool storage_tier_in, bool keep_host_on_swap_in_in,
                                 uint32_t storage_threshold_in)
  : policy(p),
    threshold(p == write_policy::write_through ? 1 : threshold_in),
    host_tier(host),
    storage(s),
    storage_tier(storage_tier_in),
    keep_host_on_swap_in(keep_host_on_swap_in_in),
    storage_threshold(storage_threshold_in) {
  // nop
}

bool write_decisions::wants_backup(uint32_t hit_count) const {
  return host_tier && policy != write_policy::write_back && hit_count >= threshold;
}

device_eviction write_decisions::on_device_evict(bool has_host_copy) const {
  if (has_host_copy)
    return device_eviction::keep_host_copy;
  if (host_tier && policy == write_policy::write_back)
    return device_eviction::write_back;
  return device_eviction::drop;
}

bool write_decisions::keeps_host_copy_after_swap_in() const {
  return policy != write_policy::write_back || keep_host_on_swap_in;
}

bool write_decisions::stores_when_host_ready(uint32_t hit_count) const {
  if (!storage_tier)
    return false;
  return storage == storage_write::always ||
         (storage == storage_write::write_through_selective && hit_count >= storage_threshold);
}

bool write_decisions::stores_on_hit(uint32_t hit_count) const {
  return storage_tier && storage == storage_write::write_through_selective &&
         hit_count == storage_threshold;
}

bool write_decisions::stores_at_finish(uint32_t hit_count) const {
  return stores_when_host_ready(hit_count);
}

bool write_decisions::stores_on_host_evict() const {
  return storage_tier && storage == storage_write::on_host_evict;
}

}  // namespace kvtier
