#pragma once

// One opener per format; open_trace() picks among them.

#include <cstdint>
#include <memory>
#include <string>

#include "sim/trace/trace_reader.hpp"

namespace kvtier {

std::unique_ptr<trace_source> open_mooncake(const std::string& path, uint32_t file_index,
                                            const reader_options& options);
std::unique_ptr<trace_source> open_azure(const std::string& path, uint32_t file_index,
                                         const reader_options& options);
std::unique_ptr<trace_source> open_agentic(const std::string& path, uint32_t file_index,
                                           const reader_options& options);
std::unique_ptr<trace_source> open_native(const std::string& path, uint32_t file_index,
                                          const reader_options& options);

}  // namespace kvtier
