// kvtier's own trace format (specified in docs/traces.md): JSONL whose first line is a header
//   {"kvtier_trace": 1, "block_size": 64, "hash_scope": "file"}
// and every further line one request
//   {"arrival_s": 0.5, "input_length": 900, "output_length": 20, "block_hashes": [...],
//    "session": "chat-7", "think_time_s": 2.5}
// The format is ours, so it is strict: unknown keys are errors, since a misspelt optional key
// would otherwise be ignored and change a replay without a word.

#include <limits>
#include <unordered_map>

#include "sim/trace/json_fields.hpp"
#include "sim/trace/line_source.hpp"
#include "sim/trace/readers.hpp"
#include "sim/trace/trace_ids.hpp"

namespace kvtier {

namespace {

constexpr uint32_t max_u32 = std::numeric_limits<uint32_t>::max();

class native_source final : public line_source {
 public:
  native_source(std::unique_ptr<line_file> lines, uint32_t file_index,
                const reader_options& options);

  trace_format format() const override { return trace_format::native; }

 private:
  struct session_state {
    uint32_t number;
    uint32_t turns;
  };

  enum field : uint32_t {
    arrival_s, input_length, output_length, block_hashes, tokens, session, think_time_s
  };

  // What one line held, beyond what it wrote into its trace_request.
  struct line_fields {
    uint32_t seen = 0;  // a bit per field
    std::string session_key;

    bool has(field f) const { return (seen & (uint32_t{1} << f)) != 0; }
  };

  void parse(std::string_view line, trace_request& out) override;
  line_fields read_fields(std::string_view line, const json_at& at, trace_request& out);
  // The prompt's fields are all there and agree with each other and the header.
  void check_prompt(const json_at& at, const line_fields& f, trace_request& out) const;
  // The line follows the lines before it: in arrival order, and in its session.
  void check_order(const json_at& at, const line_fields& f, const trace_request& out) const;
  void record(const line_fields& f, trace_request& out);

  simdjson::dom::parser parser_;
  uint32_t block_size_ = 0;  // 0: the header gave none, so lines cannot carry block hashes
  uint64_t id_space_;
  int64_t last_arrival_ns_ = 0;
  std::unordered_map<std::string, session_state> sessions_;
};

native_source::native_source(std::unique_ptr<line_file> lines, uint32_t file_index,
                             const reader_options& options)
    : line_source(std::move(lines), file_index, options), id_space_(file_id_space(file_index)) {
  std::string_view line;
  if (!next_line(line))
    throw trace_error(path(), 0, "",
                      "empty file: expected the header {\"kvtier_trace\": 1, ...}");
  // Header errors are never skipped: without the header no line can be read correctly.
  json_at at{path(), line_number(), {}};
  auto header = json_object_line(parser_, line, at);
  json_unique_keys(at, "", header);
  if (header["kvtier_trace"].error())
    at.fail("kvtier_trace", "missing: the first line of a native trace must be its header");
  for (auto [key, value] : header) {
    if (key == "kvtier_trace") {
      uint64_t version = json_uint(at, key, value, 0, max_u32);
      if (version != 1)
        at.fail(key, "unsupported version " + std::to_string(version) + " (this reader knows 1)");
    } else if (key == "block_size") {
      block_size_ = static_cast<uint32_t>(json_uint(at, key, value, 1, max_u32));
    } else if (key == "hash_scope") {
      std::string_view scope = json_string(at, key, value);
      if (scope == "global")
        id_space_ = global_id_space;
      else if (scope != "file")
        at.fail(key, "expected \"file\" or \"global\", got " + json_describe(value));
    } else {
      at.fail(key, "unknown header field (expected kvtier_trace, block_size, hash_scope)");
    }
  }
}

// 7 and "7" name the same session.
std::string session_key_of(const json_at& at, std::string_view key,
                           simdjson::dom::element value) {
  switch (value.type()) {
    case simdjson::dom::element_type::STRING:
      return std::string(value.get_string().value_unsafe());
    case simdjson::dom::element_type::INT64:
      return std::to_string(value.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return std::to_string(value.get_uint64().value_unsafe());
    default:
      at.fail(key, "expected a string or an integer, got " + json_describe(value));
  }
}

native_source::line_fields native_source::read_fields(std::string_view line, const json_at& at,
                                                      trace_request& out) {
  line_fields f;
  for (auto [key, value] : json_object_line(parser_, line, at)) {
    if (key == "arrival_s") {
      json_mark_seen(at, key, f.seen, arrival_s);
      out.arrival_ns = json_seconds_ns(at, key, value);
    } else if (key == "input_length") {
      json_mark_seen(at, key, f.seen, input_length);
      out.input_tokens = static_cast<uint32_t>(json_uint(at, key, value, 1, max_u32));
    } else if (key == "output_length") {
      json_mark_seen(at, key, f.seen, output_length);
      out.output_tokens = static_cast<uint32_t>(json_uint(at, key, value, 0, max_u32));
    } else if (key == "block_hashes") {
      json_mark_seen(at, key, f.seen, block_hashes);
      json_ids(at, key, value, out.ids);
    } else if (key == "tokens") {
      json_mark_seen(at, key, f.seen, tokens);
      json_tokens(at, key, value, out.tokens);
    } else if (key == "session") {
      json_mark_seen(at, key, f.seen, session);
      f.session_key = session_key_of(at, key, value);
    } else if (key == "think_time_s") {
      json_mark_seen(at, key, f.seen, think_time_s);
      out.think_ns = json_seconds_ns(at, key, value);
    } else {
      at.fail(key, "unknown field (expected arrival_s, input_length, output_length, "
                   "block_hashes, tokens, session, think_time_s)");
    }
  }
  return f;
}

void native_source::check_prompt(const json_at& at, const line_fields& f,
                                 trace_request& out) const {
  for (auto [bit, name] : {std::pair{arrival_s, "arrival_s"},
                           std::pair{input_length, "input_length"},
                           std::pair{output_length, "output_length"}})
    if (!f.has(bit))
      at.fail(name, "missing");
  if (f.has(block_hashes) && f.has(tokens))
    at.fail("tokens", "a line carries block_hashes or tokens, not both");
  if (f.has(block_hashes)) {
    if (block_size_ == 0)
      at.fail("block_hashes", "needs \"block_size\" in the header");
    uint64_t floor = out.input_tokens / block_size_;
    uint64_t ceil = (uint64_t{out.input_tokens} + block_size_ - 1) / block_size_;
    if (out.ids.size() != floor && out.ids.size() != ceil)
      at.fail("block_hashes", "expected " + std::to_string(floor) +
                                  (ceil == floor ? "" : " or " + std::to_string(ceil)) +
                                  " hashes (input_length " + std::to_string(out.input_tokens) +
                                  " / block_size " + std::to_string(block_size_) + "), got " +
                                  std::to_string(out.ids.size()));
    out.trace_block_size = block_size_;
    out.id_space = id_space_;
  }
  if (f.has(tokens) && out.tokens.size() != out.input_tokens)
    at.fail("tokens", "expected " + std::to_string(out.input_tokens) +
                          " token ids (input_length), got " + std::to_string(out.tokens.size()));
}

void native_source::check_order(const json_at& at, const line_fields& f,
                                const trace_request& out) const {
  if (out.arrival_ns < last_arrival_ns_)
    at.fail("arrival_s", "earlier than the previous line (the file must be sorted by arrival)");
  if (f.has(think_time_s) && !f.has(session))
    at.fail("think_time_s", "needs \"session\": it is the time after the previous line of the "
                            "same session finished");
  if (!f.has(session))
    return;
  auto found = sessions_.find(f.session_key);
  if (found == sessions_.end()) {
    if (f.has(think_time_s))
      at.fail("think_time_s", "the first line of session \"" + f.session_key +
                                  "\" cannot follow an earlier line");
    if (sessions_.size() == max_u32)
      at.fail("session", "more than 4294967295 sessions in one file");
  } else if (found->second.turns == max_u32) {
    at.fail("session", "more than 4294967295 lines in one session");
  }
}

void native_source::record(const line_fields& f, trace_request& out) {
  last_arrival_ns_ = out.arrival_ns;
  if (!f.has(session))
    return;
  auto number = static_cast<uint32_t>(sessions_.size() + 1);  // used if the session is new
  session_state& state =
      sessions_.try_emplace(f.session_key, session_state{number, 0}).first->second;
  out.session = file_session_id(file_index(), state.number);
  out.turn = state.turns++;
  out.follows_previous = f.has(think_time_s);
}

void native_source::parse(std::string_view line, trace_request& out) {
  json_at at{path(), line_number(), {}};
  line_fields f = read_fields(line, at, out);
  check_prompt(at, f, out);
  check_order(at, f, out);
  // The line is good: only now may it change the state of the file.
  record(f, out);
}

}  // namespace

std::unique_ptr<trace_source> open_native(std::unique_ptr<line_file> lines, uint32_t file_index,
                                          const reader_options& options) {
  return std::make_unique<native_source>(std::move(lines), file_index, options);
}

}  // namespace kvtier
