#pragma once

// Checks of option values that CLI11's own conversions let through: it reads an unsigned option
// with strtoull, so "-1" wraps to 18446744073709551615, and its positive-number check passes NaN
// (every comparison with NaN is false), which then hangs the wall clock.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

namespace kvtier {

/// Decimal digits only, at most `max`.
inline CLI::Validator unsigned_in_range(uint64_t max = std::numeric_limits<uint64_t>::max()) {
  return CLI::Validator(
    [max](std::string& text) -> std::string {
      std::string why = "expected an integer from 0 to " + std::to_string(max) + ", got '" +
                        text + "'";
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
        return why;
      uint64_t value = 0;
      for (char c : text) {
        uint64_t digit = static_cast<uint64_t>(c - '0');
        if (value > (max - digit) / 10)
          return why;
        value = value * 10 + digit;
      }
      return {};
    },
    "UINT<=" + std::to_string(max));
}

/// A finite number greater than 0 (not NaN, not an infinity).
inline CLI::Validator finite_positive() {
  return CLI::Validator(
    [](std::string& text) -> std::string {
      std::string why = "expected a finite number greater than 0, got '" + text + "'";
      try {
        size_t used = 0;
        double value = std::stod(text, &used);
        if (used != text.size() || !std::isfinite(value) || !(value > 0))
          return why;
      } catch (const std::exception&) {
        return why;
      }
      return {};
    },
    "POSITIVE");
}

}  // namespace kvtier
