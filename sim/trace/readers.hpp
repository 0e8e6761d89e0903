#pragma once

// One opener per format; open_trace() picks among them. Each reads the one stream that
// open_trace() opened (and may have detected the format from), from its start.

#include <cstdint>
#include <memory>
#include <string>

#include "sim/trace/line_file.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

/// Detects the format from the first lines of `lines`, which must be holding (line_file::hold)
/// so that they can be rewound for the reader.
trace_format detect_format(line_file& lines, const reader_options& options);

std::unique_ptr<trace_source> open_mooncake(std::unique_ptr<line_file> lines, uint32_t file_index,
                                            const reader_options& options);
std::unique_ptr<trace_source> open_azure(std::unique_ptr<line_file> lines, uint32_t file_index,
                                         const reader_options& options);
std::unique_ptr<trace_source> open_agentic(std::unique_ptr<line_file> lines, uint32_t file_index,
                                           const reader_options& options);
std::unique_ptr<trace_source> open_native(std::unique_ptr<line_file> lines, uint32_t file_index,
                                          const reader_options& options);

}  // namespace kvtier
