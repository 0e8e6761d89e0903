#pragma once

// The storage calibration file (`kvtier bench storage --emit-calibration`, schema
// "kvtier.storage_calibration/1"): what the file backend measured, as the modelled storage uses
// it (storage.calibration). Written and read here, so that both sides name the same fields.

#include <string>

#include <nlohmann/json.hpp>

#include "actors/storage/storage.hpp"

namespace kvtier {

struct storage_calibration {
  std::string backend;           ///< which measured backend it describes
  uint64_t block_bytes = 0;      ///< the block size it was measured at
  uint32_t batch = 0;            ///< blocks per batch of the bandwidth figures
  double lone_gap_ms = 0;        ///< the idle time before each lone request was timed
  double read_gbps = 0;          ///< a node's read bandwidth (batches)
  double write_gbps = 0;         ///< a node's write bandwidth (batches)
  double op_latency_us = 0;      ///< a lone put's fixed cost (storage.op_latency_us)
  double read_op_latency_us = 0; ///< a lone get's fixed cost (storage.read_op_latency_us)
  double stream_read_gbps = 0;   ///< one block's read rate once its latency is paid
  double stream_write_gbps = 0;  ///< one block's write rate once its latency is paid
};

nlohmann::json to_json(const storage_calibration& c);

/// Reads the file at `path` into `s`: the bandwidths and the put latency always; the read latency
/// and the stream rates where the file has them (files written before they were measured lack
/// them: then `s` keeps what the config gave). Throws config_error naming the file and field.
void apply_storage_calibration(const std::string& path, storage_options& s);

}  // namespace kvtier
