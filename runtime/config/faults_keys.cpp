#include "runtime/config/faults_keys.hpp"

namespace kvtier {

std::vector<option_spec> faults_key_specs() {
  return {
    {keys::faults::node_loss_at_s, 0, 1e9, {}, true,
     "a storage node (faults.node_loss_node) is lost at this virtual time, seconds: its blocks are "
     "gone, it comes back empty after faults.down_s; null = none"},
    {keys::faults::node_loss_node, 0, 1023, {}, false,
     "the node faults.node_loss_at_s loses (below storage.nodes)"},
    {keys::faults::node_losses_per_hour, 0, 1e9, {}, false,
     "storage node losses per hour of virtual time over the pool, at random times and nodes "
     "drawn from --seed; 0 = none"},
    {keys::faults::down_s, 0, 1e9, {}, false,
     "how long a lost storage node stays down before it comes back empty, seconds"},
    {keys::faults::slow_link_at_s, 0, 1e9, {}, true,
     "a storage node's links (faults.slow_link_node) slow down at this virtual time, seconds; "
     "null = none"},
    {keys::faults::slow_link_node, 0, 1023, {}, false,
     "the node whose links faults.slow_link_at_s slows (below storage.nodes)"},
    {keys::faults::slow_links_per_hour, 0, 1e9, {}, false,
     "slow-link windows per hour of virtual time, at random times and nodes drawn from --seed"},
    {keys::faults::slow_link_s, 0, 1e9, {}, false,
     "how long a slow-link window lasts, seconds"},
    {keys::faults::slow_link_factor, 1e-6, 1, {}, false,
     "a slow link's bandwidth, as a share of its configured bandwidth"},
    {keys::faults::get_fail_probability, 0, 1, {}, false,
     "chance that a storage get fails to read a block (drawn per block from --seed): the load "
     "fails and the request recomputes those tokens"},
    {keys::faults::put_fail_probability, 0, 1, {}, false,
     "chance that a storage put fails to write a block (drawn per block from --seed): the write is "
     "rolled back and no key is left"},
  };
}

}  // namespace kvtier
