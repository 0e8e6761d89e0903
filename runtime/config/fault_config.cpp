#include "runtime/config/fault_config.hpp"

#include <string>

#include "core/time_math.hpp"

namespace kvtier {

namespace {

int64_t seconds_to_ns(double s) {
  return time_from(s * 1e9);
}

}  // namespace

fault_options resolve_faults(const config& c, uint64_t seed, uint32_t storage_nodes,
                             uint64_t storage_blocks) {
  fault_options f;
  f.seed = seed;
  if (c.is_set(keys::faults::node_loss_at_s))
    f.node_loss_at_ns = seconds_to_ns(c.number(keys::faults::node_loss_at_s));
  f.node_loss_node = static_cast<uint32_t>(c.integer(keys::faults::node_loss_node));
  f.node_losses_per_hour = c.number(keys::faults::node_losses_per_hour);
  f.down_ns = seconds_to_ns(c.number(keys::faults::down_s));
  if (c.is_set(keys::faults::slow_link_at_s))
    f.slow_at_ns = seconds_to_ns(c.number(keys::faults::slow_link_at_s));
  f.slow_node = static_cast<uint32_t>(c.integer(keys::faults::slow_link_node));
  f.slow_per_hour = c.number(keys::faults::slow_links_per_hour);
  f.slow_ns = seconds_to_ns(c.number(keys::faults::slow_link_s));
  f.slow_factor = c.number(keys::faults::slow_link_factor);
  f.get_fail_probability = c.number(keys::faults::get_fail_probability);
  f.put_fail_probability = c.number(keys::faults::put_fail_probability);
  for (integer_key key : {keys::faults::node_loss_node, keys::faults::slow_link_node})
    if (static_cast<uint64_t>(c.integer(key)) >= storage_nodes)
      throw config_error(std::string(key.name) + ": node " + std::to_string(c.integer(key)) +
                         " does not exist: storage.nodes is " + std::to_string(storage_nodes) +
                         " (nodes are numbered from 0)");
  if (f.any() && storage_blocks == 0)
    throw config_error("faults.*: faults strike the storage pool, and there is none "
                       "(storage.capacity_tokens=0)");
  return f;
}

}  // namespace kvtier
