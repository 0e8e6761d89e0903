#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <msgpack.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "model/controller/controller_core.hpp"
#include "model/cache/radix_tree.hpp"
#include "observe/events/block_origins.hpp"
#include "observe/events/event_encoding.hpp"
#include "observe/events/event_publisher.hpp"
#include "observe/events/publishing_sink.hpp"

using namespace kvtier;

namespace {

using fields = std::map<std::string, msgpack::object>;

fields map_of(const msgpack::object& o) {
  REQUIRE(o.type == msgpack::type::MAP);
  fields out;
  for (uint32_t i = 0; i < o.via.map.size; ++i)
    out[o.via.map.ptr[i].key.as<std::string>()] = o.via.map.ptr[i].val;
  return out;
}

std::vector<uint64_t> hashes_of(const msgpack::object& o) {
  return o.as<std::vector<uint64_t>>();
}

block_event stored(tier t, block_hash h, std::optional<block_hash> parent, uint32_t tokens = 16) {
  return {block_event_kind::stored, t, h, parent, tokens};
}

block_event removed(tier t, block_hash h) {
  return {block_event_kind::removed, t, h, std::nullopt, 0};
}

uint64_t seq_of(const zmq::message_t& m) {
  REQUIRE(m.size() == 8);
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i)
    v = (v << 8) | static_cast<const unsigned char*>(m.data())[i];
  return v;
}

std::string be(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8)
    s[i] = static_cast<char>(v & 0xff);
  return s;
}

}  // namespace

// The batch: vLLM's array_like EventBatch in every layout, [ts, events, data_parallel_rank].
std::vector<msgpack::object> batch_events(const msgpack::object& batch, double ts,
                                          std::optional<int64_t> rank) {
  REQUIRE(batch.type == msgpack::type::ARRAY);
  REQUIRE(batch.via.array.size == (rank ? 3u : 2u));
  CHECK(batch.via.array.ptr[0].type == msgpack::type::FLOAT64);
  CHECK(batch.via.array.ptr[0].as<double>() == ts);
  if (rank)
    CHECK(batch.via.array.ptr[2].as<int64_t>() == *rank);
  return batch.via.array.ptr[1].as<std::vector<msgpack::object>>();
}

TEST_CASE("events: the default layout is current vLLM's, events as maps tagged by type in an "
          "array batch, runs merged", "[events]") {
  std::vector<block_event> events = {
      stored(tier::device, 11, std::nullopt), stored(tier::device, 12, 11),
      stored(tier::device, 13, 12),
      stored(tier::host, 11, std::nullopt),   // another tier: a new run
      stored(tier::device, 21, 5),            // not chained onto 13: a new run
      removed(tier::device, 11), removed(tier::device, 12), removed(tier::host, 11),
      {block_event_kind::cleared, tier::device, 0, std::nullopt, 0}};
  CHECK(wire_event_count(events) == 6);
  event_batch_header header;
  header.ts = 1234.5;
  header.data_parallel_rank = 0;
  CHECK(header.layout == event_layout::map);  // the default
  std::string bytes = encode_event_batch(header, events);
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  auto list = batch_events(oh.get(), 1234.5, 0);
  REQUIRE(list.size() == 6);

  // Every field of vLLM's BlockStored that has no default, and nothing else.
  fields first = map_of(list[0]);
  CHECK(first.size() == 8);
  CHECK(first.at("type").as<std::string>() == "BlockStored");
  CHECK(hashes_of(first.at("block_hashes")) == std::vector<uint64_t>{11, 12, 13});
  CHECK(first.at("parent_block_hash").is_nil());
  // Tokens unknown: placeholders, block_size of them per block.
  auto tokens = first.at("token_ids").as<std::vector<int32_t>>();
  REQUIRE(tokens.size() == 3 * 16);
  CHECK(std::vector<int32_t>(tokens.begin(), tokens.begin() + 16) == placeholder_tokens(11, 16));
  CHECK(std::vector<int32_t>(tokens.begin() + 16, tokens.begin() + 32)
        == placeholder_tokens(12, 16));
  CHECK(first.at("block_size").as<uint32_t>() == 16);
  CHECK(first.at("lora_id").is_nil());
  CHECK(first.at("medium").as<std::string>() == "GPU");
  CHECK(first.at("lora_name").is_nil());

  fields host = map_of(list[1]);
  CHECK(host.at("medium").as<std::string>() == "CPU");
  fields other = map_of(list[2]);
  CHECK(other.at("parent_block_hash").as<uint64_t>() == 5);
  fields gone = map_of(list[3]);
  CHECK(gone.size() == 3);
  CHECK(gone.at("type").as<std::string>() == "BlockRemoved");
  CHECK(hashes_of(gone.at("block_hashes")) == std::vector<uint64_t>{11, 12});
  CHECK(gone.at("medium").as<std::string>() == "GPU");
  CHECK(map_of(list[4]).at("medium").as<std::string>() == "CPU");
  fields cleared = map_of(list[5]);
  CHECK(cleared.size() == 1);
  CHECK(cleared.at("type").as<std::string>() == "AllBlocksCleared");

  // Full 64-bit hashes survive (msgpack unsigned); no rank, no third element.
  std::vector<block_event> one = {stored(tier::host, ~0ull, 1ull << 63)};
  std::string big = encode_event_batch({0, std::nullopt, event_layout::map}, one);
  msgpack::object_handle big_handle = msgpack::unpack(big.data(), big.size());  // owns e's bytes
  fields e = map_of(batch_events(big_handle.get(), 0, std::nullopt).at(0));
  CHECK(hashes_of(e.at("block_hashes")) == std::vector<uint64_t>{~0ull});
  CHECK(e.at("parent_block_hash").as<uint64_t>() == (1ull << 63));
}

TEST_CASE("events: the array layout is vLLM v0.11.0's positional one", "[events]") {
  std::vector<published_event> events = {
      {stored(tier::device, 11, std::nullopt, 4), {1, 2, 3, 4}},
      {stored(tier::device, 12, 11, 4), {5, 6, 7, 8}},
      {removed(tier::host, 9), {}},
      {{block_event_kind::cleared, tier::device, 0, std::nullopt, 0}, {}}};
  std::string bytes = encode_event_batch({99.5, 0, event_layout::array}, events);
  msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  auto list = batch_events(oh.get(), 99.5, 0);
  REQUIRE(list.size() == 3);
  // ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
  //  lora_name]
  auto st = list[0].as<std::vector<msgpack::object>>();
  REQUIRE(st.size() == 8);
  CHECK(st[0].as<std::string>() == "BlockStored");
  CHECK(hashes_of(st[1]) == std::vector<uint64_t>{11, 12});
  CHECK(st[2].is_nil());
  CHECK(st[3].as<std::vector<int32_t>>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(st[4].as<uint32_t>() == 4);
  CHECK(st[5].is_nil());
  CHECK(st[6].as<std::string>() == "GPU");
  CHECK(st[7].is_nil());
  auto rm = list[1].as<std::vector<msgpack::object>>();
  REQUIRE(rm.size() == 3);
  CHECK(rm[0].as<std::string>() == "BlockRemoved");
  CHECK(hashes_of(rm[1]) == std::vector<uint64_t>{9});
  CHECK(rm[2].as<std::string>() == "CPU");
  auto cl = list[2].as<std::vector<msgpack::object>>();
  REQUIRE(cl.size() == 1);
  CHECK(cl[0].as<std::string>() == "AllBlocksCleared");
  CHECK(event_layout_of("map") == event_layout::map);
  CHECK(event_layout_of("array") == event_layout::array);
  CHECK_FALSE(event_layout_of("maps"));
}

TEST_CASE("events: the topic's placeholders are filled in, unknown ones refused", "[events]") {
  CHECK(events_topic("kv@{pod}@{model}", "node-7", "llama3-8b") == "kv@node-7@llama3-8b");
  CHECK(events_topic("", "node-7", "m").empty());
  CHECK(events_topic("kv-events", "node-7", "m") == "kv-events");
  CHECK_THROWS_WITH(events_topic("kv@{host}", "p", "m"),
                    Catch::Contains("{host}") && Catch::Contains("serve.events_topic"));
  CHECK_THROWS_WITH(events_topic("kv@{pod", "p", "m"), Catch::Contains("{pod"));
}

TEST_CASE("events: blocks go out under the engine's hashes, full and announced ones only",
          "[events][zmq]") {
  event_publisher_options o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.first_seq = 5000;
  o.layout = event_layout::array;
  event_publisher pub(o);
  block_origins origins(2);
  publishing_sink sink(pub, &origins);
  origins.remember(101, {1, {7, 7, 7, 7}});
  origins.remember(102, {2, {}});
  sink.stored(tier::device, 101, std::nullopt, 4);
  sink.stored(tier::device, 102, 101, 4);
  sink.stored(tier::device, 103, 102, 2);  // never remembered (a partial block): not announced
  sink.batch_end();
  sink.removed(tier::host, 101);  // never held on the host: not announced
  sink.removed(tier::device, 103);
  sink.removed(tier::device, 102);
  CHECK(origins.size() == 1);  // 102 is held by no tier now
  sink.batch_end();
  pub.flush();

  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(pub.replay_endpoint());
  dealer.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(be(0)), zmq::send_flags::none);
  std::vector<std::vector<msgpack::object>> events;
  std::vector<msgpack::object_handle> handles;
  for (;;) {
    std::vector<zmq::message_t> frames;
    REQUIRE(zmq::recv_multipart(dealer, std::back_inserter(frames)));
    REQUIRE(frames.size() == 3);
    if (frames[1].to_string() == std::string(8, '\xff'))
      break;
    CHECK(seq_of(frames[1]) == 5000 + handles.size());  // numbered from first_seq
    handles.push_back(msgpack::unpack(frames[2].data<char>(), frames[2].size()));
    events.push_back(handles.back().get().via.array.ptr[1].as<std::vector<msgpack::object>>());
  }
  REQUIRE(events.size() == 2);
  REQUIRE(events[0].size() == 1);
  auto st = events[0][0].as<std::vector<msgpack::object>>();
  CHECK(hashes_of(st[1]) == std::vector<uint64_t>{1, 2});  // the engine's hashes
  auto tokens = st[3].as<std::vector<int32_t>>();
  CHECK(std::vector<int32_t>(tokens.begin(), tokens.begin() + 4) == std::vector<int32_t>(4, 7));
  CHECK(std::vector<int32_t>(tokens.begin() + 4, tokens.end()) == placeholder_tokens(2, 4));
  REQUIRE(events[1].size() == 1);
  auto rm = events[1][0].as<std::vector<msgpack::object>>();
  CHECK(hashes_of(rm[1]) == std::vector<uint64_t>{2});

  origins.remember(201, {21, {}});
  origins.remember(202, {22, {}});
  origins.remember(203, {23, {}});  // beyond 2 idle ones: the oldest remembered goes
  CHECK_FALSE(origins.engine_hash(201));
  CHECK(origins.engine_hash(203) == 23u);
  CHECK(origins.engine_hash(101) == 1u);  // held on the device: kept
}

TEST_CASE("events: published batches carry topic and sequence, and replay resends the ring",
          "[events][zmq]") {
  event_publisher_options o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.topic = "kv";
  o.buffer_batches = 3;
  o.layout = event_layout::map;
  event_publisher pub(o);
  REQUIRE(pub.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  REQUIRE(pub.endpoint() != o.endpoint);  // the wildcard port resolved

  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect(pub.endpoint());
  // A PUB drops what it sends before the subscription reaches it: the first batch is sent until
  // one arrives; those sent meanwhile are the gap that the replay below fills.
  std::vector<zmq::message_t> frames;
  // Nothing to say: no batch, no number.
  CHECK_FALSE(pub.publish(std::vector<block_event>{}).has_value());
  uint64_t first_seen = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    pub.publish({stored(tier::device, 100 + attempt, std::nullopt)});
    pub.flush();
    sub.set(zmq::sockopt::rcvtimeo, 50);
    frames.clear();
    if (zmq::recv_multipart(sub, std::back_inserter(frames))) {
      first_seen = seq_of(frames[1]);
      break;
    }
  }
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].to_string() == "kv");
  // A probe that was slow to arrive may have others behind it: take them all.
  sub.set(zmq::sockopt::rcvtimeo, 200);
  for (std::vector<zmq::message_t> more; zmq::recv_multipart(sub, std::back_inserter(more));
       more.clear())
    first_seen = seq_of(more[1]);
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  auto seq = pub.publish({removed(tier::host, 7), removed(tier::host, 8)});
  REQUIRE(seq == first_seen + 1);
  frames.clear();
  REQUIRE(zmq::recv_multipart(sub, std::back_inserter(frames)));
  CHECK(seq_of(frames[1]) == *seq);
  msgpack::object_handle handle =  // owns the bytes `list` points into
    msgpack::unpack(static_cast<const char*>(frames[2].data()), frames[2].size());
  REQUIRE(handle.get().type == msgpack::type::ARRAY);
  auto list = handle.get().via.array.ptr[1].as<std::vector<msgpack::object>>();
  REQUIRE(list.size() == 1);
  CHECK(hashes_of(map_of(list[0]).at("block_hashes")) == std::vector<uint64_t>{7, 8});
  for (int i = 0; i < 3; ++i)
    pub.publish({removed(tier::device, 50 + i)});
  pub.flush();
  uint64_t last = *seq + 3;

  zmq::socket_t replay(ctx, zmq::socket_type::dealer);
  replay.set(zmq::sockopt::rcvtimeo, 5000);
  replay.connect(pub.replay_endpoint());
  auto ask = [&](uint64_t start) {
    replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
    replay.send(zmq::buffer(be(start)), zmq::send_flags::none);
    std::vector<uint64_t> got;
    for (;;) {
      std::vector<zmq::message_t> r;
      REQUIRE(zmq::recv_multipart(replay, std::back_inserter(r)));
      REQUIRE(r.size() == 3);
      CHECK(r[0].size() == 0);
      if (seq_of(r[1]) == ~0ull) {
        CHECK(r[2].size() == 0);
        return got;
      }
      got.push_back(seq_of(r[1]));
    }
  };
  // The ring keeps the last three batches; asking from an older number returns what it has,
  // whose first number tells the subscriber what was lost.
  CHECK(ask(0) == std::vector<uint64_t>{last - 2, last - 1, last});
  CHECK(ask(last) == std::vector<uint64_t>{last});
  CHECK(ask(last + 1).empty());

  // A malformed request is answered with the end marker and counted; the publisher goes on.
  replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  replay.send(zmq::str_buffer("bad"), zmq::send_flags::none);
  std::vector<zmq::message_t> r;
  REQUIRE(zmq::recv_multipart(replay, std::back_inserter(r)));
  CHECK(seq_of(r[1]) == ~0ull);
  CHECK(ask(last) == std::vector<uint64_t>{last});
  event_publisher_stats s = pub.stats();
  CHECK(s.batches == last + 1);
  CHECK(s.replay_requests == 4);
  CHECK(s.bad_replay_requests == 1);
  CHECK(s.replayed_batches == 5);
}

TEST_CASE("events: a publisher connects to a subscriber that binds, as llm-d's does",
          "[events][zmq]") {
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv@");
  sub.bind("tcp://127.0.0.1:*");
  std::string bound = sub.get(zmq::sockopt::last_endpoint);
  event_publisher_options o;
  o.endpoint = bound;
  o.socket = events_socket::connect;
  o.topic = "kv@node@model";
  event_publisher pub(o);
  CHECK(pub.endpoint() == bound);
  // Batches sent before the connection and the subscription are made are dropped by the PUB
  // socket (the replay socket fills such a gap); send until one arrives.
  std::vector<zmq::message_t> frames;
  for (int attempt = 0; attempt < 200 && frames.empty(); ++attempt) {
    pub.publish({stored(tier::device, 500 + attempt, std::nullopt)});
    pub.flush();
    sub.set(zmq::sockopt::rcvtimeo, 25);
    (void)zmq::recv_multipart(sub, std::back_inserter(frames));
  }
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].to_string() == "kv@node@model");
  CHECK(events_socket_of("connect") == events_socket::connect);
  CHECK(events_socket_of("bind") == events_socket::bind);
  CHECK_FALSE(events_socket_of("listen"));
  CHECK(std::string(to_string(events_socket::connect)) == "connect");
}

TEST_CASE("events: a publisher that cannot bind names the endpoint", "[events][zmq]") {
  event_publisher_options o;
  o.endpoint = "tcp://127.0.0.1:*";
  event_publisher first(o);
  event_publisher_options taken;
  taken.endpoint = first.endpoint();
  REQUIRE_THROWS_WITH(event_publisher(taken), Catch::Contains(first.endpoint()));
  taken.endpoint = "nonsense";
  REQUIRE_THROWS_WITH(event_publisher(taken), Catch::Contains("'nonsense'"));
}

TEST_CASE("events: a controller's changes reach a subscriber, one message per controller message",
          "[events][zmq]") {
  event_publisher_options o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.replay_endpoint = "tcp://127.0.0.1:*";
  o.layout = event_layout::map;
  event_publisher pub(o);
  publishing_sink sink(pub);
  cache_options cache;
  cache.device_blocks = 2;
  cache.host_blocks = 4;
  cache.policy = write_policy::write_through;
  controller_options copts;
  copts.block_size = 16;
  copts.events = &sink;
  controller_core core(cache, copts);
  auto blocks = [](std::vector<uint64_t> ids) {
    std::vector<cache_block> out;
    map_trace_blocks(7, ids.data(), ids.size(), static_cast<uint32_t>(ids.size()) * 16, 16, 16,
                     out);
    return out;
  };
  std::vector<transfer> out;
  std::vector<request_id> landed;
  grant g;
  step_inputs in;
  core.on_arrival(1, blocks({1, 2}));
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  core.on_commit(commit{2, {{1, 32}}, {1}, {}, {}, {}}, g = {}, out, in = {});
  REQUIRE(out.size() == 1);  // the write-through backup of both blocks
  core.on_transfer_done(transfer_done{out[0].id, true, 0, {}, ""}, out, landed);
  pub.flush();
  // Two batches: the commit stored both blocks on the device; the backup stored them on the host.
  CHECK(pub.stats().batches == 2);

  zmq::context_t ctx;
  zmq::socket_t replay(ctx, zmq::socket_type::dealer);
  replay.set(zmq::sockopt::rcvtimeo, 5000);
  replay.connect(pub.replay_endpoint());
  replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  replay.send(zmq::buffer(be(0)), zmq::send_flags::none);
  std::vector<std::pair<std::string, std::vector<uint64_t>>> seen;  // medium, hashes
  for (;;) {
    std::vector<zmq::message_t> r;
    REQUIRE(zmq::recv_multipart(replay, std::back_inserter(r)));
    if (seq_of(r[1]) == ~0ull)
      break;
    msgpack::object_handle handle =  // owns the bytes `list` points into
      msgpack::unpack(static_cast<const char*>(r[2].data()), r[2].size());
    auto list = batch_events(handle.get(), handle.get().via.array.ptr[0].as<double>(), 0);
    REQUIRE(list.size() == 1);  // a chained run: one BlockStored
    fields e = map_of(list[0]);
    CHECK(e.at("type").as<std::string>() == "BlockStored");
    seen.emplace_back(e.at("medium").as<std::string>(), hashes_of(e.at("block_hashes")));
  }
  auto b = blocks({1, 2});
  std::vector<uint64_t> hashes = {b[0].hash, b[1].hash};
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::make_pair(std::string("GPU"), hashes));
  CHECK(seen[1] == std::make_pair(std::string("CPU"), hashes));
}
