#include "runtime/config/links_keys.hpp"

namespace kvtier {

std::vector<option_spec> links_key_specs() {
  return {
    {keys::links::h2d_gbps, 0.001, 1e6, {}, false, "PCIe host to device, GB/s"},
    {keys::links::d2h_gbps, 0.001, 1e6, {}, false, "PCIe device to host, GB/s"},
    {keys::links::duplex_gbps, 0.001, 1e6, {}, false,
     "PCIe both directions together, GB/s"},
    {keys::links::h2d_layer_latency_us, 0, 1e9, {}, false,
     "fixed cost of each layer of a swap-in, microseconds"},
    {keys::links::h2d_layer_wait_us, 0, 1e6, {}, false,
     "what each layer of a step that follows a swap-in loses to the wait on its copy event, even "
     "when its data is in place (an event wait between the GPU's copy and compute streams), "
     "microseconds; the calibration file's compute.layer_wait_us"},
    {keys::links::h2d_submit_us_per_block, 0, 1e6, {}, false,
     "host time per block of a swap-in before the step's compute can follow it (the compute "
     "waits on the copy's layer events, which exist once the copy is submitted), microseconds; "
     "the calibration file's h2d.submit_us_per_block"},
    {keys::links::d2h_latency_us, 0, 1e9, {}, false,
     "fixed cost of each device-to-host transfer, microseconds"},
    {keys::links::calibration, 0, 0, {}, true,
     "a file from `kvtier bench transfer --emit-calibration`: its measured PCIe bandwidths and "
     "latencies replace links.h2d_*, links.d2h_* and links.duplex_gbps"},
    {keys::links::nic_gbps, 0.001, 1e6, {}, false,
     "host network link to storage, GB/s"},
    {keys::links::nic_latency_us, 0, 1e9, {}, false,
     "fixed cost of each storage transfer over the network, microseconds"},
    {keys::links::pd_gbps, 0.001, 1e6, {}, false,
     "PD, pd.transfer = direct: each prefill instance's KV send link to decode instances (RDMA), "
     "GB/s"},
    {keys::links::pd_latency_us, 0, 1e9, {}, false,
     "PD, pd.transfer = direct: fixed cost of each layer sent over the PD link, microseconds"},
  };
}

}  // namespace kvtier
