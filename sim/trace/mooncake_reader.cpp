// Mooncake FAST'25 traces: one JSON object per line,
//   {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [id, ...]}
// where hash_ids names the 512-token blocks of the prompt, prefix-chained, the partial last block
// included (len == ceil(input_length / 512)). Ids are dense and local to the file. Other keys are
// ignored: producers of Mooncake-style traces add their own.

#include <limits>

#include "sim/trace/json_fields.hpp"
#include "sim/trace/line_source.hpp"
#include "sim/trace/readers.hpp"
#include "sim/trace/trace_ids.hpp"

namespace kvtier {

namespace {

constexpr uint32_t mooncake_block_size = 512;
constexpr int64_t ns_per_ms = 1'000'000;

class mooncake_source final : public line_source {
 public:
  mooncake_source(std::unique_ptr<line_file> lines, uint32_t file_index,
                  const reader_options& options)
      : line_source(std::move(lines), file_index, options), id_space_(file_id_space(file_index)) {
    // nop
  }

  trace_format format() const override { return trace_format::mooncake; }

 private:
  void parse(std::string_view line, trace_request& out) override;

  simdjson::dom::parser parser_;
  uint64_t id_space_;
  int64_t last_arrival_ns_ = 0;
};

void mooncake_source::parse(std::string_view line, trace_request& out) {
  enum field : uint32_t { timestamp, input_length, output_length, hash_ids, field_count };
  static constexpr const char* names[field_count] = {"timestamp", "input_length",
                                                     "output_length", "hash_ids"};
  constexpr uint64_t max_ms = std::numeric_limits<int64_t>::max() / ns_per_ms;
  constexpr uint32_t max_u32 = std::numeric_limits<uint32_t>::max();
  json_at at{path(), line_number(), {}};
  uint32_t seen = 0;
  for (auto [key, value] : json_object_line(parser_, line, at)) {
    if (key == names[timestamp]) {
      json_mark_seen(at, key, seen, timestamp);
      out.arrival_ns = static_cast<int64_t>(json_uint(at, key, value, 0, max_ms)) * ns_per_ms;
    } else if (key == names[input_length]) {
      json_mark_seen(at, key, seen, input_length);
      out.input_tokens = static_cast<uint32_t>(json_uint(at, key, value, 1, max_u32));
    } else if (key == names[output_length]) {
      json_mark_seen(at, key, seen, output_length);
      out.output_tokens = static_cast<uint32_t>(json_uint(at, key, value, 0, max_u32));
    } else if (key == names[hash_ids]) {
      json_mark_seen(at, key, seen, hash_ids);
      json_ids(at, key, value, out.ids);
    }
  }
  for (uint32_t f = 0; f < field_count; ++f)
    if ((seen & (uint32_t{1} << f)) == 0)
      at.fail(names[f], "missing");
  uint64_t expected = (uint64_t{out.input_tokens} + mooncake_block_size - 1) / mooncake_block_size;
  if (out.ids.size() != expected)
    at.fail(names[hash_ids], "expected " + std::to_string(expected) + " ids (ceil(" +
                                 std::to_string(out.input_tokens) + "/" +
                                 std::to_string(mooncake_block_size) + ")), got " +
                                 std::to_string(out.ids.size()));
  // The merger relies on every file being in arrival order, and Mooncake files are.
  if (out.arrival_ns < last_arrival_ns_)
    at.fail(names[timestamp], std::to_string(out.arrival_ns / ns_per_ms) +
                                  " is earlier than the previous line's " +
                                  std::to_string(last_arrival_ns_ / ns_per_ms) +
                                  " (the file must be sorted by timestamp)");
  last_arrival_ns_ = out.arrival_ns;
  out.trace_block_size = mooncake_block_size;
  out.id_space = id_space_;
}

}  // namespace

std::unique_ptr<trace_source> open_mooncake(std::unique_ptr<line_file> lines, uint32_t file_index,
                                            const reader_options& options) {
  return std::make_unique<mooncake_source>(std::move(lines), file_index, options);
}

}  // namespace kvtier
