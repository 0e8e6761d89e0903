// kvtier bench serve: client connections replaying a trace's verbs against a running `kvtier
// serve` (one engine each), then a ZeroMQ echo of the same messages on the same machine in the
// same run: the round trip the server cannot beat. Each engine takes its requests
// `--requests-per-step` at a time, as an engine's scheduler does in one step: their lookups go
// out together, then their allocations, their waits, one step admitting them all and one step
// computing and finishing them all. A message's latency runs from its send to its reply; a verb
// call's latency is that of the message carrying it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "app/bench/bench_serve_calls.hpp"
#include "serve/client/client.hpp"
#include "app/bench/bench_serve_open.hpp"
#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "runtime/config/replay_config.hpp"
#include "sim/full/preloaded_trace.hpp"
#include "core/build_info.hpp"
#include "sim/report/atomic_file.hpp"

namespace kvtier {

namespace {

using steady = std::chrono::steady_clock;
using namespace kvtier::serve;
using bench_serve::pack_marks;
using bench_serve::percentile_us;

struct message_size {
  uint32_t out = 0;   // request bytes
  uint32_t back = 0;  // reply bytes
};

struct worker_log {
  std::map<std::string, std::vector<int64_t>> latency_ns;  // by message kind
  std::vector<int64_t> verb_latency_ns;  // one entry per verb call: its message's latency
  // The messages in the order sent; each group was sent back to back, then its replies awaited.
  std::vector<std::vector<message_size>> groups;
  uint64_t messages = 0;
  uint64_t verbs = 0;
  std::string error;
};

int64_t ns_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// Calls sent back to back, then awaited together; replies are timed as they arrive.
class call_group {
 public:
  call_group(client& c, worker_log& log) : c_(c), log_(log) {}

  /// `verbs`: the verb calls the message carries (a step's list entries).
  void send(const char* kind, uint32_t verbs, uint32_t fields,
            const std::function<void(map_writer&)>& fill) {
    auto t0 = steady::now();
    uint64_t id = c_.send(kind, fields, fill);
    sent_.push_back({id, kind, verbs, t0, static_cast<uint32_t>(c_.last_sent_bytes())});
  }

  /// The replies in the order sent; throws on an error reply.
  std::vector<reply> finish() {
    std::vector<reply> replies(sent_.size());
    std::vector<message_size> sizes(sent_.size());
    for (size_t got = 0; got < sent_.size(); ++got) {
      std::optional<reply> r = c_.next(std::chrono::seconds(60));
      auto t = steady::now();
      if (!r)
        throw std::runtime_error("no reply from the server within 60 s");
      const msgpack::object* id = r->find("id");
      auto it = std::find_if(sent_.begin(), sent_.end(), [&](const out& o) {
        return id && id->type == msgpack::type::POSITIVE_INTEGER && o.id == id->via.u64;
      });
      if (it == sent_.end())
        throw std::runtime_error("a reply to no call of this group");
      check_ok(*r);
      size_t i = static_cast<size_t>(it - sent_.begin());
      int64_t ns = ns_between(it->t0, t);
      log_.latency_ns[it->kind].push_back(ns);
      log_.verb_latency_ns.insert(log_.verb_latency_ns.end(), it->verbs, ns);
      log_.verbs += it->verbs;
      sizes[i] = {it->bytes, static_cast<uint32_t>(r->bytes)};
      replies[i] = std::move(*r);
    }
    log_.messages += sent_.size();
    log_.groups.push_back(std::move(sizes));
    sent_.clear();
    return replies;
  }

 private:
  struct out {
    uint64_t id;
    const char* kind;
    uint32_t verbs;
    steady::time_point t0;
    uint32_t bytes;
  };
  client& c_;
  worker_log& log_;
  std::vector<out> sent_;
};

// One engine: its requests, `per_step` at a time, are looked up, allocated (waited for when
// pending), admitted in one step, then computed and finished in the next.
void serve_worker(zmq::context_t& ctx, const bench_serve_args& args, const replay_config& rc,
                  const preloaded_trace& t, uint32_t index, steady::time_point end,
                  worker_log& log) {
  try {
    client c(ctx, args.connect, args.token);
    c.hello("bench-" + std::to_string(index), rc.model, rc.block_size);
    call_group g(c, log);
    const uint32_t per_step = args.requests_per_step;
    uint64_t req = 0, step = 0;
    size_t next = index;
    while (steady::now() < end) {
      struct pick {
        uint64_t req;
        size_t k;
      };
      std::vector<pick> reqs;
      for (uint32_t j = 0; j < per_step; ++j, next += args.clients)
        reqs.push_back({++req, next % t.requests.size()});
      for (const pick& p : reqs)
        g.send("lookup", 1, 1, [&](map_writer& w) { put_blocks(w, t.blocks[p.k]); });
      g.finish();
      for (const pick& p : reqs)
        g.send("allocate", 1, 2, [&](map_writer& w) {
          w.put("req", p.req);
          put_blocks(w, t.blocks[p.k]);
        });
      std::vector<reply> states = g.finish();
      for (size_t j = 0; j < reqs.size(); ++j)
        if (states[j].str("state") == "pending")
          g.send("wait", 1, 1, [&](map_writer& w) { w.put("req", reqs[j].req); });
      g.finish();
      std::vector<std::pair<uint64_t, uint32_t>> admits;
      for (const pick& p : reqs)
        admits.emplace_back(p.req, t.requests[p.k].input_tokens);
      g.send("step", per_step, 2, [&](map_writer& w) {
        w.put("step", ++step);
        pack_marks(w, "admits", admits);
      });
      reply admitted_reply = std::move(g.finish().front());
      const msgpack::object* list = admitted_reply.find("admits");
      std::vector<std::pair<uint64_t, uint32_t>> computed;
      std::vector<uint64_t> finished;
      for (uint32_t j = 0; list && j < list->via.array.size; ++j) {
        const msgpack::object& a = list->via.array.ptr[j];
        if (reply::find_in(a, "admitted")->via.boolean)
          computed.push_back(admits[j]);
        finished.push_back(admits[j].first);
      }
      g.send("step", static_cast<uint32_t>(computed.size() + finished.size()), 3,
             [&](map_writer& w) {
               w.put("step", ++step);
               pack_marks(w, "computed", computed);
               w.put("finished", finished);
             });
      g.finish();
    }
    c.call("bye");
  } catch (const std::exception& e) {
    log.error = e.what();
  }
}

// The baseline: a ROUTER thread that answers every message with as many bytes as its first
// four ask for (the size of the server's reply to the call it stands for).
void echo_server(zmq::context_t& ctx, const std::string& endpoint, std::atomic<bool>& stop) {
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind(endpoint);
  std::string payload(16u << 20, 'y');
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
      uint32_t back = static_cast<uint32_t>(body.size());
      if (body.size() >= 4)
        std::memcpy(&back, body.data(), 4);
      s.send(id, zmq::send_flags::sndmore);
      s.send(zmq::const_buffer(payload.data(), std::min<size_t>(back, payload.size())),
             zmq::send_flags::none);
    }
  }
}

// Replays a serve client's messages: the same sizes both ways, in the same groups.
void echo_worker(zmq::context_t& ctx, const std::string& endpoint,
                 const std::vector<std::vector<message_size>>& groups, steady::time_point end,
                 worker_log& log) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  std::string payload(16u << 20, 'x');
  auto& lat = log.latency_ns["echo"];
  std::vector<steady::time_point> t0;
  for (size_t i = 0; steady::now() < end && !groups.empty(); ++i) {
    const auto& group = groups[i % groups.size()];
    t0.clear();
    for (const message_size& m : group) {
      uint32_t out = std::max<uint32_t>(m.out, 4);
      std::memcpy(payload.data(), &m.back, 4);
      t0.push_back(steady::now());
      s.send(zmq::const_buffer(payload.data(), std::min<size_t>(out, payload.size())),
             zmq::send_flags::none);
    }
    for (size_t j = 0; j < group.size(); ++j) {
      zmq::message_t m;
      if (!s.recv(m, zmq::recv_flags::none))
        return;
      lat.push_back(ns_between(t0[j], steady::now()));  // one ROUTER thread: replies in order
      ++log.messages;
    }
  }
}

// One phase: a thread per client, each running `body` until the same end.
struct phase_result {
  std::vector<worker_log> logs;
  double wall_s = 0;
};

template <class Body>
phase_result run_phase(const bench_serve_args& args, Body body) {
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
  return {std::move(logs), wall};
}

phase_result serve_phase(const bench_serve_args& args, const replay_config& rc,
                         const preloaded_trace& t) {
  // One context (one ZeroMQ I/O thread) for all clients of a phase, in both phases alike.
  zmq::context_t serve_ctx(1);
  phase_result serve = run_phase(args, [&](uint32_t i, steady::time_point end, worker_log& log) {
    serve_worker(serve_ctx, args, rc, t, i, end, log);
  });
  for (const worker_log& l : serve.logs)
    if (!l.error.empty())
      throw std::runtime_error("a client failed: " + l.error);
  return serve;
}

// The serve phase's message groups again, against the echo.
phase_result echo_phase(const bench_serve_args& args, const std::vector<worker_log>& serve_logs) {
  zmq::context_t echo_clients_ctx(1);
  // The echo's own I/O thread, as the server's process has its own: on the clients' context one
  // I/O thread would move both ends' bytes, a round trip no server in another process can make.
  zmq::context_t echo_server_ctx(1);
  std::atomic<bool> stop{false};
  std::string echo_ep = "tcp://127.0.0.1:" + std::to_string(args.echo_port);
  std::thread echo([&] { echo_server(echo_server_ctx, echo_ep, stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  phase_result echoed = run_phase(args, [&](uint32_t i, steady::time_point end, worker_log& log) {
    echo_worker(echo_clients_ctx, echo_ep, serve_logs[i].groups, end, log);
  });
  stop = true;
  echo.join();
  return echoed;
}

// Both phases' logs merged: latencies by message kind, per verb call and of the echo.
struct bench_totals {
  std::map<std::string, std::vector<int64_t>> by_kind;
  std::vector<int64_t> verb_latency;
  std::vector<int64_t> all;
  std::vector<int64_t> echo_all;
  uint64_t messages = 0, verbs = 0, echo_messages = 0;
  double bytes = 0;
};

bench_totals merge_logs(std::vector<worker_log>& serve_logs, std::vector<worker_log>& echo_logs) {
  bench_totals s;
  for (auto& l : serve_logs) {
    s.messages += l.messages;
    s.verbs += l.verbs;
    for (auto& [kind, v] : l.latency_ns)
      s.by_kind[kind].insert(s.by_kind[kind].end(), v.begin(), v.end());
    s.verb_latency.insert(s.verb_latency.end(), l.verb_latency_ns.begin(),
                          l.verb_latency_ns.end());
    for (auto& g : l.groups)
      for (const message_size& m : g)
        s.bytes += m.out + m.back;
  }
  for (auto& [kind, v] : s.by_kind)
    s.all.insert(s.all.end(), v.begin(), v.end());
  for (auto& l : echo_logs) {
    s.echo_messages += l.messages;
    auto& v = l.latency_ns["echo"];
    s.echo_all.insert(s.echo_all.end(), v.begin(), v.end());
  }
  return s;
}

// The table on stdout and the same figures in `j`.
void report_bench(const bench_serve_args& args, bench_totals& s, double serve_wall,
                  double echo_wall, nlohmann::json& j) {
  double message_rate = static_cast<double>(s.messages) / serve_wall;
  double verb_rate = static_cast<double>(s.verbs) / serve_wall;
  double echo_rate = static_cast<double>(s.echo_messages) / echo_wall;
  j["clients"] = args.clients;
  j["requests_per_step"] = args.requests_per_step;
  j["seconds"] = serve_wall;
  j["messages"] = s.messages;
  j["messages_per_s"] = message_rate;
  j["verb_calls"] = s.verbs;
  j["verb_calls_per_s"] = verb_rate;
  j["mean_message_bytes"] = s.messages ? s.bytes / 2 / static_cast<double>(s.messages) : 0;
  std::printf("kvtier serve, %u clients, %u requests per step, %.1f s: %llu messages "
              "(%.0f/s, mean %.0f B) carrying %llu verb calls (%.0f/s)\n",
              args.clients, args.requests_per_step, serve_wall,
              static_cast<unsigned long long>(s.messages), message_rate,
              j["mean_message_bytes"].get<double>(), static_cast<unsigned long long>(s.verbs),
              verb_rate);
  std::printf("%-10s %10s %10s %9s %9s %9s\n", "message", "count", "per s", "p50 us", "p99 us",
              "p999 us");
  auto row = [&](const std::string& name, std::vector<int64_t>& v, double wall) {
    double rate = static_cast<double>(v.size()) / wall;
    double p50 = percentile_us(v, 0.5), p99 = percentile_us(v, 0.99);
    double p999 = percentile_us(v, 0.999);
    std::printf("%-10s %10zu %10.0f %9.1f %9.1f %9.1f\n", name.c_str(), v.size(), rate, p50, p99,
                p999);
    j["rows"][name] = {{"count", v.size()}, {"per_s", rate}, {"p50_us", p50}, {"p99_us", p99},
                       {"p999_us", p999}};
  };
  for (auto& [kind, v] : s.by_kind)
    row(kind, v, serve_wall);
  row("messages", s.all, serve_wall);
  row("verbs", s.verb_latency, serve_wall);
  row("echo", s.echo_all, echo_wall);
  double ratio = echo_rate > 0 ? message_rate / echo_rate : 0;
  j["echo_messages_per_s"] = echo_rate;
  j["ratio_to_echo"] = ratio;
  std::printf("serve / echo message rate: %.2f (targets: >= 100000 verb calls/s, verb p99 < "
              "1000 us, ratio >= 0.5)\n", ratio);
}

}  // namespace

CLI::App* add_bench_serve_command(CLI::App& bench, bench_serve_args& args) {
  auto* cmd = bench.add_subcommand(
    "serve", "Messages and verb calls per second and latency against a running kvtier serve, "
             "beside a same-run ZeroMQ echo of the same messages (tools/bench-serve)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--connect", args.connect, "the server's endpoint")->required();
  cmd->add_option("--token", args.token, "the server's token");
  cmd->add_option("--trace", args.traces, "trace whose requests the clients replay")->required();
  cmd->add_option("--clients,--engines", args.clients, "client connections (one engine each)")
    ->check(CLI::Range(1, 256))
    ->capture_default_str();
  cmd->add_option("--requests-per-step", args.requests_per_step,
                  "requests each engine takes together: their lookups, allocations and waits "
                  "in flight at once, then one step admitting them all and one computing and "
                  "finishing them all (1: one call in flight)")
    ->check(CLI::Range(1, 1024))
    ->capture_default_str();
  cmd->add_option("--seconds", args.seconds, "how long each phase runs")
    ->check(CLI::Range(0.1, 3600.0))
    ->capture_default_str();
  cmd->add_option("--json", args.json_out, "write the figures to this file");
  cmd->add_option("--echo-port", args.echo_port, "loopback port of the echo baseline")
    ->check(CLI::Range(1, 65535))
    ->capture_default_str();
  cmd->add_flag_callback("--open", [&args] { args.mode = bench_serve_args::loop::open; },
                         "open loop: each engine steps at fixed rates (--steps-per-s), latency "
                         "from each step's scheduled time; no echo phase");
  cmd->add_option("--steps-per-s", args.steps_per_s,
                  "--open: the offered loads, steps per second per engine, in turn")
    ->check(CLI::Range(0.1, 100000.0))
    ->capture_default_str();
  cmd->add_option("--new-per-step", args.new_per_step,
                  "--open: new requests each engine takes per step")
    ->check(CLI::Range(1, 1024))
    ->capture_default_str();
  cmd->add_option("--p99-bound-us", args.p99_bound_us,
                  "--open: the verb p99 a load must stay under to count as carried")
    ->check(CLI::Range(1.0, 1e9))
    ->capture_default_str();
  cmd->add_option("--csv", args.csv_out, "--open: write the curve to this CSV file");
  cmd->add_option("--io-threads", args.io_threads,
                  "--open: ZeroMQ I/O threads moving the engines' messages (one engine's "
                  "connection is served by one of them)")
    ->check(CLI::Range(1, 64))
    ->capture_default_str();
  return cmd;
}

int run_bench_serve(const bench_serve_args& args) {
  config cfg = load_config(args.config);
  replay_config rc = resolve(cfg);
  preloaded_trace t = preload(args.traces, rc.block_size);
  if (t.requests.empty())
    throw config_error("--trace: no requests");
  if (args.mode == bench_serve_args::loop::open) {
    nlohmann::json j;
    int code = run_open_loop(args, rc, t, j);
    if (!args.json_out.empty()) {
      atomic_file f(args.json_out);
      f.out() << j.dump(2) << '\n';
      f.commit();
    }
    return code;
  }
  phase_result serve = serve_phase(args, rc, t);
  phase_result echoed = echo_phase(args, serve.logs);
  bench_totals totals = merge_logs(serve.logs, echoed.logs);
  nlohmann::json j = {{"kvtier_version", build_line()}};
  std::printf("kvtier: %s\n", build_line().c_str());
  report_bench(args, totals, serve.wall_s, echoed.wall_s, j);
  if (!args.json_out.empty()) {
    atomic_file f(args.json_out);
    f.out() << j.dump(2) << '\n';
    f.commit();
  }
  return exit_ok;
}

}  // namespace kvtier
