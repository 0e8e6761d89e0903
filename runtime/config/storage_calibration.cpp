#include "runtime/config/storage_calibration.hpp"

#include <cmath>
#include <fstream>

#include "core/time_math.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

namespace {

constexpr const char* schema = "kvtier.storage_calibration/1";

}  // namespace

nlohmann::json to_json(const storage_calibration& c) {
  return {{"schema", schema},
          {"backend", c.backend},
          {"block_bytes", c.block_bytes},
          {"batch", c.batch},
          {"lone_gap_ms", c.lone_gap_ms},
          {"read_gbps", c.read_gbps},
          {"write_gbps", c.write_gbps},
          {"op_latency_us", c.op_latency_us},
          {"read_op_latency_us", c.read_op_latency_us},
          {"stream_read_gbps", c.stream_read_gbps},
          {"stream_write_gbps", c.stream_write_gbps}};
}

void apply_storage_calibration(const std::string& path, storage_options& s) {
  std::ifstream in(path);
  if (!in)
    throw config_error("storage.calibration: " + path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw config_error("storage.calibration: " + path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("schema", "") != schema)
    throw config_error("storage.calibration: " + path + ": field 'schema': expected \"" +
                       schema + "\"");
  auto number = [&](const char* field) {
    if (!j.contains(field) || !j[field].is_number() || !std::isfinite(j[field].get<double>()) ||
        j[field].get<double>() <= 0)
      throw config_error("storage.calibration: " + path + ": field '" + field +
                         "': expected a positive number");
    return j[field].get<double>();
  };
  s.read_gbps = number("read_gbps");
  s.write_gbps = number("write_gbps");
  s.op_latency_ns = us_to_ns(number("op_latency_us"));
  if (j.contains("read_op_latency_us"))
    s.read_op_latency_ns = us_to_ns(number("read_op_latency_us"));
  // One block alone (schema 1 files written before it was measured lack it: the cap stays).
  if (j.contains("stream_read_gbps") || j.contains("stream_write_gbps")) {
    s.stream_read_gbps = number("stream_read_gbps");
    s.stream_write_gbps = number("stream_write_gbps");
  }
}

}  // namespace kvtier
