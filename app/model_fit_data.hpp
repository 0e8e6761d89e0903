#pragma once

// `kvtier model-fit`'s measurement file (measurements/step_times.json, schema
// kvtier.step_measurements/1) read into points, each with the text its tables show; errors name
// the file, the point and the field (docs/models.md, "Calibration").

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/scheduler/step_fit.hpp"

namespace kvtier::model_fit {

/// `v` printed with the printf `format`.
std::string fmt(const char* format, double v);
/// A relative error as a signed percentage ("+3.1%").
std::string percent(double e);

// One point of the file, with the text the tables show.
struct point {
  step_measurement m;
  std::string model, weights, kv, kind_text, shape_text, measured_text, unit;
  uint32_t tp = 1;

  /// `seconds` of this point in its measured unit, as the table shows it.
  std::string in_unit(double seconds) const {
    double v = seconds;
    if (unit == "ms")
      v = seconds * 1e3;
    else if (unit == "tok/s" || unit == "tok/s/gpu")
      v = static_cast<double>(m.batch * m.output) / seconds / (unit == "tok/s/gpu" ? tp : 1);
    return fmt("%.4g", v) + " " + unit;
  }
};

struct data_set {
  nlohmann::json sources;
  std::vector<point> points;
};

/// The whole file; throws config_error naming the file, the point and the field.
data_set read_data(const std::string& file);

}  // namespace kvtier::model_fit
