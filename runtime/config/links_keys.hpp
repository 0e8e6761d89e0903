#pragma once

// The links.* config keys: the PCIe, NIC and PD links of a timed replay
// (actors/transfer_engine/transfer_engine.hpp). Read by instance_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in links_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::links {

inline constexpr number_key h2d_gbps{"links.h2d_gbps"};
inline constexpr number_key d2h_gbps{"links.d2h_gbps"};
inline constexpr number_key duplex_gbps{"links.duplex_gbps"};
inline constexpr number_key h2d_layer_latency_us{"links.h2d_layer_latency_us"};
inline constexpr number_key h2d_layer_wait_us{"links.h2d_layer_wait_us"};
inline constexpr number_key h2d_submit_us_per_block{"links.h2d_submit_us_per_block"};
inline constexpr number_key d2h_latency_us{"links.d2h_latency_us"};
inline constexpr text_key calibration{"links.calibration"};
inline constexpr number_key nic_gbps{"links.nic_gbps"};
inline constexpr number_key nic_latency_us{"links.nic_latency_us"};
inline constexpr number_key pd_gbps{"links.pd_gbps"};
inline constexpr number_key pd_latency_us{"links.pd_latency_us"};

}  // namespace keys::links

/// The links.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> links_key_specs();

}  // namespace kvtier
