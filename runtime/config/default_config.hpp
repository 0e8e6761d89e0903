#pragma once

namespace kvtier {

/// configs/default.json as compiled into the binary (generated from default_config.cpp.in).
extern const char* const default_config_json;

}  // namespace kvtier
