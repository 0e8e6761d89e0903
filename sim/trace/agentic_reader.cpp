// Agentic coding sessions (kv-cache-tester / WEKA Claude Code traces): one JSON document per
// conversation,
//   {"block_size": 64, "hash_id_scope": "local", "requests": [
//     {"t": 0.0, "type": "n", "in": 10261, "out": 251, "hash_ids": [...], "think_time": 0.0,
//      "api_time": 3.1},
//     {"t": 134.2, "type": "subagent", "requests": [{"t": 0.0, ...}, ...]}, ...]}
// `t` is seconds from the conversation start, or from the sub-agent start inside a sub-agent;
// hash_ids lists full blocks only (len == floor(in / block_size)), ids local to the file.
//
// The document is flattened into requests sorted by absolute time. The main conversation is one
// session and every sub-agent another; see docs/traces.md for how dependencies are derived.
//
// A merge opens every file at once, so the flattened requests stay in memory together: their ids
// are kept as deltas against the previous request of the same session (consecutive requests of
// a conversation share most of their blocks): the 9.6M ids of the 83 bundled files keep 0.5M.

#include <algorithm>
#include <limits>
#include <optional>

#include "core/check.hpp"
#include "sim/trace/json_fields.hpp"
#include "sim/trace/reader_support.hpp"
#include "sim/trace/readers.hpp"
#include "sim/trace/trace_ids.hpp"

namespace kvtier {

namespace {

using simdjson::dom::element;

constexpr uint32_t max_u32 = std::numeric_limits<uint32_t>::max();

// The field `name` of `object`, or a "missing" error.
element required_field(const json_at& at, simdjson::dom::object object,
                       std::string_view name) {
  element value;
  if (object[name].get(value))
    at.fail(name, "missing");
  return value;
}

// An optional field: absent and null both mean "not recorded".
std::optional<element> optional_field(simdjson::dom::object object, std::string_view name) {
  element value;
  if (object[name].get(value) || value.is_null())
    return std::nullopt;
  return value;
}

class agentic_source final : public trace_source {
 public:
  agentic_source(line_file& lines, uint32_t file_index, const reader_options& options);

  bool next(trace_request& out) override;
  uint64_t skipped() const override { return skipped_; }
  trace_format format() const override { return trace_format::agentic; }
  uint64_t bytes_read() const override { return bytes_; }
  uint64_t bytes_total() const override { return bytes_; }

 private:
  // One request of the flattened document; its ids are the first `shared` ids of the previous
  // request of its session followed by tails_[tail_begin, tail_begin + tail_count).
  struct request {
    int64_t arrival_ns;
    uint64_t line;
    uint32_t input_tokens;
    uint32_t output_tokens;
    uint32_t session;  // number within the file, from 1 (the main conversation)
    uint32_t turn;
    int64_t think_ns;
    bool follows_previous;
    uint32_t parent_session;  // 0: none
    uint32_t parent_turn;
    uint32_t shared;
    uint32_t tail_count;
    size_t tail_begin;
  };

  // A session while the document is read.
  struct conversation {
    explicit conversation(uint32_t n) : number(n) {}
    uint32_t number;
    uint32_t turns = 0;
    int64_t last_arrival_ns = 0;
    int64_t last_end_ns = 0;  // arrival + api_time of the last request
    std::vector<uint64_t> last_ids;
  };

  // The main request a sub-agent's first request waits for.
  struct parent_link {
    uint32_t session;
    uint32_t turn;
    int64_t end_ns;
  };

  void flatten(simdjson::dom::array requests, const std::string& path, int64_t offset_ns,
               conversation& conv, const std::optional<parent_link>& parent);
  void add_subagent(simdjson::dom::object entry, const std::string& name, int64_t offset_ns,
                    conversation& conv);
  void add_request(element value, const std::string& name, int64_t offset_ns,
                   conversation& conv, const std::optional<parent_link>& parent);

  std::string path_;
  uint32_t file_index_;
  reader_options options_;
  uint64_t bytes_ = 0;
  uint64_t skipped_ = 0;
  uint32_t block_size_ = 0;
  uint64_t numbered_ = 0;  // requests numbered so far, in document order
  uint32_t sessions_ = 0;
  std::vector<uint64_t> ids_;  // scratch
  std::vector<request> requests_;
  std::vector<uint64_t> tails_;
  size_t next_ = 0;
  std::vector<std::vector<uint64_t>> last_ids_;  // per session, while requests are handed out
};

agentic_source::agentic_source(line_file& lines, uint32_t file_index,
                               const reader_options& options)
    : path_(lines.path()), file_index_(file_index), options_(options) {
  simdjson::padded_string text(lines.rest(options.max_document_bytes));
  bytes_ = text.size();
  simdjson::dom::parser parser;
  element root;
  // Document-level errors are never skipped: there is no request to skip.
  json_at at{path_, 0, {}};
  if (auto error = parser.parse(text).get(root))
    at.fail("", std::string("malformed JSON: ") + simdjson::error_message(error));
  auto object = json_object(at, "", root);
  json_unique_keys(at, "", object);
  block_size_ = static_cast<uint32_t>(
      json_uint(at, "block_size", required_field(at, object, "block_size"), 1, max_u32));
  if (auto scope = optional_field(object, "hash_id_scope")) {
    if (json_string(at, "hash_id_scope", *scope) != "local")
      at.fail("hash_id_scope", "only \"local\" is supported, got " + json_describe(*scope));
  }
  auto requests = json_array(at, "requests", required_field(at, object, "requests"));
  conversation top{++sessions_};
  flatten(requests, "requests", 0, top, std::nullopt);
  // Stable: ties keep document order, and so does every session, whose times never go back.
  std::stable_sort(requests_.begin(), requests_.end(),
                   [](const request& a, const request& b) { return a.arrival_ns < b.arrival_ns; });
  last_ids_.resize(sessions_ + 1);
}

void agentic_source::flatten(simdjson::dom::array requests, const std::string& path,
                             int64_t offset_ns, conversation& conv,
                             const std::optional<parent_link>& parent) {
  size_t index = 0;
  for (element value : requests) {
    std::string name = path + "[" + std::to_string(index++) + "]";
    simdjson::dom::object entry;
    std::string_view type;
    if (!value.get_object().get(entry) && !entry["type"].get_string().get(type) &&
        type == "subagent") {
      // The requests of a bad entry keep their numbers, so that numbering depends on the
      // document alone.
      simdjson::dom::array inner;
      size_t inner_count = entry["requests"].get_array().get(inner) ? 0 : inner.size();
      uint64_t before = numbered_;
      try {
        add_subagent(entry, name, offset_ns, conv);
      } catch (const trace_error& error) {
        numbered_ = before + inner_count;
        skip_or_throw(options_, error, skipped_);
      }
    } else {
      ++numbered_;
      try {
        add_request(value, name, offset_ns, conv, conv.turns == 0 ? parent : std::nullopt);
      } catch (const trace_error& error) {
        skip_or_throw(options_, error, skipped_);
      }
    }
  }
}

void agentic_source::add_subagent(simdjson::dom::object entry, const std::string& name,
                                  int64_t offset_ns, conversation& conv) {
  json_at at{path_, numbered_ + 1, name + "."};
  json_unique_keys(at, "", entry);
  if (conv.number != 1)
    at.fail("type", "a sub-agent inside a sub-agent is not supported");
  int64_t t_ns = json_seconds_ns(at, "t", required_field(at, entry, "t"));
  auto requests = json_array(at, "requests", required_field(at, entry, "requests"));
  if (t_ns > std::numeric_limits<int64_t>::max() - offset_ns)
    at.fail("t", "too large");
  int64_t start_ns = offset_ns + t_ns;
  std::optional<parent_link> parent;
  if (conv.turns > 0) {
    if (start_ns < conv.last_arrival_ns)
      at.fail("t", "the sub-agent starts before the request it follows");
    parent = parent_link{conv.number, conv.turns - 1, conv.last_end_ns};
  }
  conversation sub{++sessions_};
  flatten(requests, name + ".requests", start_ns, sub, parent);
}

void agentic_source::add_request(element value, const std::string& name, int64_t offset_ns,
                                 conversation& conv, const std::optional<parent_link>& parent) {
  auto object = json_object(json_at{path_, numbered_, {}}, name, value);
  json_at at{path_, numbered_, name + "."};
  json_unique_keys(at, "", object);
  json_string(at, "type", required_field(at, object, "type"));
  int64_t t_ns = json_seconds_ns(at, "t", required_field(at, object, "t"));
  auto input = static_cast<uint32_t>(
      json_uint(at, "in", required_field(at, object, "in"), 1, max_u32));
  auto output = static_cast<uint32_t>(
      json_uint(at, "out", required_field(at, object, "out"), 0, max_u32));
  json_ids(at, "hash_ids", required_field(at, object, "hash_ids"), ids_);
  std::optional<int64_t> think_ns, api_ns;
  if (auto v = optional_field(object, "think_time"))
    think_ns = json_seconds_ns(at, "think_time", *v);
  if (auto v = optional_field(object, "api_time"))
    api_ns = json_seconds_ns(at, "api_time", *v);
  uint64_t expected = input / block_size_;
  if (ids_.size() != expected)
    at.fail("hash_ids", "expected " + std::to_string(expected) + " ids (floor(" +
                            std::to_string(input) + "/" + std::to_string(block_size_) +
                            ")), got " + std::to_string(ids_.size()));
  if (t_ns > std::numeric_limits<int64_t>::max() - offset_ns)
    at.fail("t", "too large");
  int64_t arrival_ns = offset_ns + t_ns;
  if (conv.turns > 0 && arrival_ns < conv.last_arrival_ns)
    at.fail("t", "earlier than the previous request of its conversation");
  int64_t api = api_ns.value_or(0);  // api_time absent: taken as 0
  if (api > std::numeric_limits<int64_t>::max() - arrival_ns)
    at.fail("api_time", "too large");

  request r{};
  r.arrival_ns = arrival_ns;
  r.line = numbered_;
  r.input_tokens = input;
  r.output_tokens = output;
  r.session = conv.number;
  r.turn = conv.turns;
  if (conv.turns > 0) {
    // Without think_time, the gap the trace shows (think_time is that gap wherever both exist).
    r.follows_previous = true;
    r.think_ns = think_ns ? *think_ns : std::max<int64_t>(0, arrival_ns - conv.last_end_ns);
  } else if (parent) {
    r.follows_previous = true;
    r.parent_session = parent->session;
    r.parent_turn = parent->turn;
    r.think_ns = std::max<int64_t>(0, arrival_ns - parent->end_ns);
  }
  auto diverge = std::mismatch(conv.last_ids.begin(), conv.last_ids.end(), ids_.begin(),
                               ids_.end());
  r.shared = static_cast<uint32_t>(diverge.second - ids_.begin());
  r.tail_begin = tails_.size();
  r.tail_count = static_cast<uint32_t>(ids_.end() - diverge.second);
  tails_.insert(tails_.end(), diverge.second, ids_.end());
  requests_.push_back(r);

  ++conv.turns;
  conv.last_arrival_ns = arrival_ns;
  conv.last_end_ns = arrival_ns + api;
  conv.last_ids.swap(ids_);
}

bool agentic_source::next(trace_request& out) {
  if (next_ == requests_.size())
    return false;
  const request& r = requests_[next_++];
  reset_request(out);
  out.file = file_index_;
  out.line = r.line;
  out.arrival_ns = r.arrival_ns;
  out.input_tokens = r.input_tokens;
  out.output_tokens = r.output_tokens;
  std::vector<uint64_t>& last = last_ids_[r.session];
  KVTIER_ASSERT(r.shared <= last.size());
  out.ids.assign(last.begin(), last.begin() + r.shared);
  out.ids.insert(out.ids.end(), tails_.begin() + r.tail_begin,
                 tails_.begin() + r.tail_begin + r.tail_count);
  last = out.ids;
  out.trace_block_size = block_size_;
  out.id_space = file_id_space(file_index_);
  out.session = file_session_id(file_index_, r.session);
  out.turn = r.turn;
  out.think_ns = r.think_ns;
  out.follows_previous = r.follows_previous;
  if (r.parent_session != 0) {
    out.parent_session = file_session_id(file_index_, r.parent_session);
    out.parent_turn = r.parent_turn;
  }
  return true;
}

}  // namespace

std::unique_ptr<trace_source> open_agentic(std::unique_ptr<line_file> lines, uint32_t file_index,
                                           const reader_options& options) {
  // The document is read whole, into memory of its own: the stream is done with.
  return std::make_unique<agentic_source>(*lines, file_index, options);
}

}  // namespace kvtier
