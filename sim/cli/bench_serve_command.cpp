// kvtier bench serve: client connections replaying a trace's verbs against a running `kvtier
// serve` (one engine each, one call in flight each), then a ZeroMQ echo of the same message
// sizes on the same machine in the same run: the round trip the server cannot beat.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "serve/client.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/load_config.hpp"
#include "sim/config/replay_config.hpp"
#include "sim/full/preloaded_trace.hpp"
#include "sim/report/atomic_file.hpp"

namespace kvtier {

namespace {

using steady = std::chrono::steady_clock;
using namespace kvtier::serve;

struct worker_log {
  std::map<std::string, std::vector<int64_t>> latency_ns;  // by verb
  std::vector<std::pair<uint32_t, uint32_t>> sizes;         // request, reply bytes
  uint64_t calls = 0;
  std::string error;
};

int64_t timed_call(client& c, worker_log& log, const char* op, uint32_t fields,
                   const std::function<void(map_writer&)>& fill, reply* out = nullptr) {
  auto t0 = steady::now();
  uint64_t id = c.send(op, fields, fill);
  reply r = c.receive(id);
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0).count();
  check_ok(r);
  log.latency_ns[op].push_back(ns);
  log.sizes.emplace_back(static_cast<uint32_t>(c.last_sent_bytes()),
                         static_cast<uint32_t>(r.bytes));
  ++log.calls;
  if (out)
    *out = std::move(r);
  return ns;
}

void write_blocks(map_writer& w, const std::vector<cache_block>& blocks) {
  auto& pk = w.key("blocks");
  pk.pack_array(static_cast<uint32_t>(blocks.size()));
  for (const cache_block& b : blocks) {
    pk.pack_array(2);
    pk.pack(b.hash);
    pk.pack(b.tokens);
  }
}

void pack_mark(map_writer& w, const char* key, uint64_t req, uint32_t tokens) {
  auto& pk = w.key(key);
  pk.pack_array(1);
  pk.pack_array(2);
  pk.pack(req);
  pk.pack(tokens);
}

// One engine: each of its requests is looked up, allocated (waited for when pending), admitted,
// then computed and finished in one step.
void serve_worker(const bench_serve_args& args, const replay_config& rc, const preloaded_trace& t,
                  uint32_t index, steady::time_point end, worker_log& log) {
  try {
    client c(args.connect, args.token);
    c.hello("bench-" + std::to_string(index), rc.model.name, rc.model.layers, rc.model.kv_heads,
            rc.model.head_dim, rc.model.kv_dtype, rc.block_size);
    uint64_t req = 0, step = 0;
    for (size_t i = index; steady::now() < end; i += args.clients) {
      size_t k = i % t.requests.size();
      const auto& blocks = t.blocks[k];
      uint32_t tokens = t.requests[k].input_tokens;
      ++req;
      timed_call(c, log, "lookup", 1, [&](map_writer& w) { write_blocks(w, blocks); });
      reply r;
      timed_call(c, log, "allocate", 2, [&](map_writer& w) {
        w.put("req", req);
        write_blocks(w, blocks);
      }, &r);
      if (r.str("state") == "pending")
        timed_call(c, log, "wait", 1, [&](map_writer& w) { w.put("req", req); });
      timed_call(c, log, "step", 2, [&](map_writer& w) {
        w.put("step", ++step);
        pack_mark(w, "admits", req, tokens);
      }, &r);
      const msgpack::object& a = r.find("admits")->via.array.ptr[0];
      bool admitted = reply::find_in(a, "admitted")->via.boolean;
      if (admitted)
        timed_call(c, log, "step", 3, [&](map_writer& w) {
          w.put("step", ++step);
          pack_mark(w, "computed", req, tokens);
          w.put("finished", std::vector<uint64_t>{req});
        });
      else
        timed_call(c, log, "finish", 1, [&](map_writer& w) { w.put("req", req); });
    }
    c.call("bye");
  } catch (const std::exception& e) {
    log.error = e.what();
  }
}

// The baseline: a ROUTER that sends every message back, and clients that send the sizes the
// server's calls had, one in flight each.
void echo_server(zmq::context_t& ctx, const std::string& endpoint, std::atomic<bool>& stop) {
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind(endpoint);
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0)
      continue;
    for (;;) {
      zmq::message_t id, body;
      if (!s.recv(id, zmq::recv_flags::dontwait))
        break;
      if (!s.recv(body, zmq::recv_flags::none))
        break;
      s.send(id, zmq::send_flags::sndmore);
      s.send(body, zmq::send_flags::none);
    }
  }
}

void echo_worker(zmq::context_t& ctx, const std::string& endpoint,
                 const std::vector<std::pair<uint32_t, uint32_t>>& sizes, steady::time_point end,
                 worker_log& log) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  std::string payload(1 << 20, 'x');
  auto& lat = log.latency_ns["echo"];
  for (size_t i = 0; steady::now() < end && !sizes.empty(); ++i) {
    // the request's size out and the reply's size back, as the server's call had
    uint32_t out = sizes[i % sizes.size()].first;
    auto t0 = steady::now();
    s.send(zmq::const_buffer(payload.data(), std::min<size_t>(out, payload.size())),
           zmq::send_flags::none);
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::none))
      break;
    lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0).count());
    ++log.calls;
  }
}

double pct(std::vector<int64_t>& v, double p) {
  if (v.empty())
    return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return static_cast<double>(v[i]) / 1000.0;
}

}  // namespace

CLI::App* add_bench_serve_command(CLI::App& bench, bench_serve_args& args) {
  auto* cmd = bench.add_subcommand(
    "serve", "Verb calls per second and latency against a running kvtier serve, beside a "
             "same-run ZeroMQ echo of the same message sizes (tools/bench-serve)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--connect", args.connect, "the server's endpoint")->required();
  cmd->add_option("--token", args.token, "the server's token");
  cmd->add_option("--trace", args.traces, "trace whose requests the clients replay")->required();
  cmd->add_option("--clients", args.clients, "client connections (one engine each)")
    ->check(CLI::Range(1, 256))
    ->capture_default_str();
  cmd->add_option("--seconds", args.seconds, "how long each phase runs")
    ->check(CLI::Range(0.1, 3600.0))
    ->capture_default_str();
  cmd->add_option("--json", args.json_out, "write the figures to this file");
  cmd->add_option("--echo-port", args.echo_port, "loopback port of the echo baseline")
    ->check(CLI::Range(1, 65535))
    ->capture_default_str();
  return cmd;
}

int run_bench_serve(const bench_serve_args& args) {
  config cfg = load_config(args.config);
  replay_config rc = resolve(cfg);
  preloaded_trace t = preload(args.traces, rc.block_size);
  if (t.requests.empty())
    throw config_error("--trace: no requests");
  auto phase = [&](auto body) {
    std::vector<worker_log> logs(args.clients);
    std::vector<std::thread> threads;
    auto start = steady::now();
    auto end = start + std::chrono::duration_cast<steady::duration>(
                         std::chrono::duration<double>(args.seconds));
    for (uint32_t i = 0; i < args.clients; ++i)
      threads.emplace_back([&, i] { body(i, end, logs[i]); });
    for (auto& th : threads)
      th.join();
    double wall = std::chrono::duration<double>(steady::now() - start).count();
    return std::make_pair(std::move(logs), wall);
  };
  auto [serve_logs, serve_wall] = phase([&](uint32_t i, steady::time_point end, worker_log& log) {
    serve_worker(args, rc, t, i, end, log);
  });
  for (const worker_log& l : serve_logs)
    if (!l.error.empty())
      throw std::runtime_error("a client failed: " + l.error);
  zmq::context_t ctx(1);
  std::atomic<bool> stop{false};
  std::string echo_ep = "tcp://127.0.0.1:" + std::to_string(args.echo_port);
  std::thread echo([&] { echo_server(ctx, echo_ep, stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto [echo_logs, echo_wall] = phase([&](uint32_t i, steady::time_point end, worker_log& log) {
    echo_worker(ctx, echo_ep, serve_logs[i].sizes, end, log);
  });
  stop = true;
  echo.join();

  std::map<std::string, std::vector<int64_t>> by_verb;
  uint64_t serve_calls = 0, echo_calls = 0;
  double bytes = 0;
  for (auto& l : serve_logs) {
    serve_calls += l.calls;
    for (auto& [verb, v] : l.latency_ns)
      by_verb[verb].insert(by_verb[verb].end(), v.begin(), v.end());
    for (auto& [a, b] : l.sizes)
      bytes += a + b;
  }
  std::vector<int64_t> all;
  for (auto& [verb, v] : by_verb)
    all.insert(all.end(), v.begin(), v.end());
  std::vector<int64_t> echo_all;
  for (auto& l : echo_logs) {
    echo_calls += l.calls;
    auto& v = l.latency_ns["echo"];
    echo_all.insert(echo_all.end(), v.begin(), v.end());
  }
  nlohmann::json j;
  j["clients"] = args.clients;
  j["seconds"] = serve_wall;
  j["calls"] = serve_calls;
  j["calls_per_s"] = static_cast<double>(serve_calls) / serve_wall;
  j["mean_message_bytes"] = serve_calls ? bytes / 2 / static_cast<double>(serve_calls) : 0;
  std::printf("kvtier serve, %u clients, %.1f s: %llu calls, %.0f calls/s (mean message %.0f B)\n",
              args.clients, serve_wall, static_cast<unsigned long long>(serve_calls),
              j["calls_per_s"].get<double>(), j["mean_message_bytes"].get<double>());
  std::printf("%-10s %10s %10s %9s %9s %9s\n", "verb", "calls", "calls/s", "p50 us", "p99 us",
              "p999 us");
  auto row = [&](const std::string& name, std::vector<int64_t>& v, double wall) {
    double rate = static_cast<double>(v.size()) / wall;
    double p50 = pct(v, 0.5), p99 = pct(v, 0.99), p999 = pct(v, 0.999);
    std::printf("%-10s %10zu %10.0f %9.1f %9.1f %9.1f\n", name.c_str(), v.size(), rate, p50, p99,
                p999);
    j["verbs"][name] = {{"calls", v.size()}, {"calls_per_s", rate}, {"p50_us", p50},
                        {"p99_us", p99}, {"p999_us", p999}};
  };
  for (auto& [verb, v] : by_verb)
    row(verb, v, serve_wall);
  row("all", all, serve_wall);
  row("echo", echo_all, echo_wall);
  double ratio = echo_calls ? (static_cast<double>(serve_calls) / serve_wall) /
                                (static_cast<double>(echo_calls) / echo_wall)
                            : 0;
  j["echo_calls_per_s"] = static_cast<double>(echo_calls) / echo_wall;
  j["ratio_to_echo"] = ratio;
  std::printf("serve / echo rate: %.2f (targets: >= 100000 calls/s, p99 < 1000 us, ratio >= "
              "0.5)\n", ratio);
  if (!args.json_out.empty()) {
    atomic_file f(args.json_out);
    f.out() << j.dump(2) << '\n';
    f.commit();
  }
  return exit_ok;
}

}  // namespace kvtier
