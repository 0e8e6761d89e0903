// kvtier bench serve --open: an open-loop benchmark of a running `kvtier serve`. Each of the
// `--engines` engines steps at a fixed rate on its own schedule (the engines' schedules are
// staggered across one period); each step takes `--new-per-step` new requests from the trace and
// sends what an engine's scheduler sends per step: a lookup per waiting request, an allocation
// per new request (a status query for one still loading), then one `step` that reports the last
// step's admissions computed and finished and admits the requests that are ready.
//
// Open loop: a step's time is fixed in advance, whether or not the server has answered the last
// one. A client thread can only send a step once its previous one is answered, so when the server
// falls behind a step starts late; every message of that step is then charged the lateness
// (latency = reply time - the time it would have been sent on schedule), as wrk2 does. Latency is
// thus measured from the scheduled send, and queueing is charged: no coordinated omission.

#include "app/bench/bench_serve_open.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "core/build_info.hpp"
#include "app/bench/bench_serve_calls.hpp"
#include "serve/client/client.hpp"

namespace kvtier {

namespace {

using steady = std::chrono::steady_clock;
using namespace kvtier::serve;
using bench_serve::pack_marks;
using bench_serve::percentile_us;

struct engine_log {
  std::map<std::string, std::vector<int64_t>> latency_ns;  // by message kind
  std::vector<int64_t> verb_latency_ns;  // one entry per verb call: its message's latency
  // The same latencies by the second of the load in which their step was due: the first
  // second against the rest shows a start-up penalty (issue: "no start-up penalty").
  std::vector<std::vector<int64_t>> verb_latency_by_second;
  uint64_t steps = 0, messages = 0, verbs = 0;
  uint64_t refused = 0;  // admissions refused (the request waits for the next step)
  uint64_t pending = 0;  // allocations answered `pending` (storage asked or loading)
  int64_t max_lag_ns = 0;
  std::string error;
};

struct waiting_request {
  uint64_t req;
  size_t k;  // the trace request it replays
  bool allocated = false;
  bool ready = false;
};

// Sends a group of calls back to back, then awaits them; each reply is charged `lag_ns` more.
class timed_group {
 public:
  timed_group(client& c, engine_log& log, int64_t lag_ns, size_t second)
      : c_(c), log_(log), lag_(lag_ns), second_(second) {}

  void send(const char* kind, uint32_t verbs, uint32_t fields,
            const std::function<void(map_writer&)>& fill) {
    auto t0 = steady::now();
    sent_.push_back({c_.send(kind, fields, fill), kind, verbs, t0});
  }

  std::vector<reply> finish() {
    std::vector<reply> replies(sent_.size());
    for (size_t got = 0; got < sent_.size(); ++got) {
      std::optional<reply> r = c_.next(std::chrono::seconds(60));
      auto t = steady::now();
      if (!r)
        throw std::runtime_error("no reply from the server within 60 s");
      uint64_t id = r->id();
      auto it = std::find_if(sent_.begin(), sent_.end(), [&](const out& o) { return o.id == id; });
      if (it == sent_.end())
        throw std::runtime_error("a reply to no call of this group");
      check_ok(*r);
      int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t - it->t0).count() + lag_;
      log_.latency_ns[it->kind].push_back(ns);
      log_.verb_latency_ns.insert(log_.verb_latency_ns.end(), it->verbs, ns);
      if (log_.verb_latency_by_second.size() <= second_)
        log_.verb_latency_by_second.resize(second_ + 1);
      auto& by_second = log_.verb_latency_by_second[second_];
      by_second.insert(by_second.end(), it->verbs, ns);
      log_.verbs += it->verbs;
      replies[static_cast<size_t>(it - sent_.begin())] = std::move(*r);
    }
    log_.messages += sent_.size();
    sent_.clear();
    return replies;
  }

 private:
  struct out {
    uint64_t id;
    const char* kind;
    uint32_t verbs;
    steady::time_point t0;
  };
  client& c_;
  engine_log& log_;
  int64_t lag_;
  size_t second_;
  std::vector<out> sent_;
};

struct engine_plan {
  uint32_t index = 0;
  double steps_per_s = 0;
  steady::time_point start;  // the load's start
  steady::time_point first;  // its first step's scheduled time
  steady::time_point end;
};

// One engine's state between steps: its waiting requests and the last step's admissions.
struct engine_run {
  client& c;
  const preloaded_trace& t;
  const bench_serve_args& args;
  engine_log& log;
  std::vector<waiting_request> waiting;
  std::vector<std::pair<uint64_t, uint32_t>> running;
  uint64_t req = 0, step = 0;
  size_t next;
  size_t second = 0;  // of the load, in which the current step was due

  void lookups_and_allocations(int64_t lag) {
    timed_group g(c, log, lag, second);
    for (const waiting_request& w : waiting)
      g.send("lookup", 1, 1, [&](map_writer& m) { put_blocks(m, t.blocks[w.k]); });
    g.finish();
    std::vector<waiting_request*> asked;
    for (waiting_request& w : waiting) {
      if (w.ready)
        continue;
      asked.push_back(&w);
      bool fresh = !w.allocated;
      g.send("allocate", 1, fresh ? 2 : 1, [&](map_writer& m) {
        m.put("req", w.req);
        if (fresh)
          put_blocks(m, t.blocks[w.k]);
      });
      w.allocated = true;
    }
    std::vector<reply> states = g.finish();
    for (size_t j = 0; j < asked.size(); ++j) {
      asked[j]->ready = states[j].str("state") != "pending";
      log.pending += asked[j]->ready ? 0 : 1;
    }
  }

  void report_and_admit(int64_t lag) {
    std::vector<std::pair<uint64_t, uint32_t>> admits;
    std::vector<size_t> admitted_from;
    for (size_t j = 0; j < waiting.size(); ++j)
      if (waiting[j].ready) {
        admits.emplace_back(waiting[j].req, t.requests[waiting[j].k].input_tokens);
        admitted_from.push_back(j);
      }
    std::vector<uint64_t> finished;
    for (auto& [r, tokens] : running)
      finished.push_back(r);
    timed_group g(c, log, lag, second);
    auto verbs = static_cast<uint32_t>(admits.size() + running.size() + finished.size());
    g.send("step", verbs, 4, [&](map_writer& m) {
      m.put("step", ++step);
      pack_marks(m, "computed", running);
      m.put("finished", finished);
      pack_marks(m, "admits", admits);
    });
    reply r = std::move(g.finish().front());
    running.clear();
    const msgpack::object* list = r.find("admits");
    std::vector<bool> gone(waiting.size(), false);
    for (uint32_t j = 0; list && j < list->via.array.size && j < admits.size(); ++j) {
      if (reply::find_in(list->via.array.ptr[j], "admitted")->via.boolean) {
        running.push_back(admits[j]);
        gone[admitted_from[j]] = true;
      } else {
        ++log.refused;
      }
    }
    std::vector<waiting_request> still;
    for (size_t j = 0; j < waiting.size(); ++j)
      if (!gone[j])
        still.push_back(waiting[j]);
    waiting = std::move(still);
  }

  void one_step(int64_t lag, size_t due_second) {
    second = due_second;
    for (uint32_t j = 0; j < args.new_per_step; ++j, next += args.clients)
      waiting.push_back({++req, next % t.requests.size()});
    lookups_and_allocations(lag);
    report_and_admit(lag);
    ++log.steps;
  }
};

void open_engine(zmq::context_t& ctx, const bench_serve_args& args, const replay_config& rc,
                 const preloaded_trace& t, const engine_plan& p, engine_log& log) {
  try {
    client c(ctx, args.connect, args.token);
    c.hello("open-" + std::to_string(p.index), rc.model, rc.block_size);
    engine_run run{c, t, args, log, {}, {}, 0, 0, p.index};
    auto period = std::chrono::duration_cast<steady::duration>(
      std::chrono::duration<double>(1.0 / p.steps_per_s));
    for (uint64_t i = 0;; ++i) {
      steady::time_point due = p.first + period * static_cast<int64_t>(i);
      auto now = steady::now();
      if (due >= p.end || now >= p.end)
        break;
      if (now < due)
        std::this_thread::sleep_until(due);
      int64_t lag = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - due).count());
      log.max_lag_ns = std::max(log.max_lag_ns, lag);
      run.one_step(lag, static_cast<size_t>((due - p.start) / std::chrono::seconds(1)));
    }
    c.call("bye");
  } catch (const std::exception& e) {
    log.error = e.what();
  }
}

void merge_seconds(std::vector<std::vector<int64_t>>& into,
                   const std::vector<std::vector<int64_t>>& from) {
  if (into.size() < from.size())
    into.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i)
    into[i].insert(into[i].end(), from[i].begin(), from[i].end());
}

// The verb p99 of each second of the load, and of the first second against the seconds after
// it (the steady state): the start-up penalty's ratio, 0 when the load had one second only.
void add_start_up(nlohmann::json& j, std::vector<std::vector<int64_t>>& by_second) {
  nlohmann::json per_second = nlohmann::json::array();
  std::vector<int64_t> after;
  for (size_t i = 0; i < by_second.size(); ++i) {
    if (i > 0)
      after.insert(after.end(), by_second[i].begin(), by_second[i].end());
    per_second.push_back({{"second", i}, {"count", by_second[i].size()},
                          {"p99_us", percentile_us(by_second[i], 0.99)}});
  }
  double first = by_second.empty() ? 0 : percentile_us(by_second[0], 0.99);
  double steady_p99 = percentile_us(after, 0.99);
  j["verb_p99_by_second"] = std::move(per_second);
  j["first_second_verb_p99_us"] = first;
  j["after_first_second_verb_p99_us"] = steady_p99;
  j["first_second_over_steady"] = steady_p99 > 0 ? first / steady_p99 : 0.0;
}

// One offered load: every engine at `steps_per_s` for `args.seconds`.
nlohmann::json run_point(const bench_serve_args& args, const replay_config& rc,
                         const preloaded_trace& t, double steps_per_s) {
  zmq::context_t ctx(args.io_threads);
  std::vector<engine_log> logs(args.clients);
  std::vector<std::thread> threads;
  auto start = steady::now() + std::chrono::milliseconds(50);
  auto window = std::chrono::duration_cast<steady::duration>(
    std::chrono::duration<double>(args.seconds));
  for (uint32_t i = 0; i < args.clients; ++i) {
    auto offset = std::chrono::duration_cast<steady::duration>(
      std::chrono::duration<double>(i / (steps_per_s * args.clients)));
    engine_plan p{i, steps_per_s, start, start + offset, start + window};
    threads.emplace_back([&, p] { open_engine(ctx, args, rc, t, p, logs[p.index]); });
  }
  for (auto& th : threads)
    th.join();
  engine_log all;
  for (engine_log& l : logs) {
    if (!l.error.empty())
      throw std::runtime_error("an engine failed: " + l.error);
    all.steps += l.steps;
    all.messages += l.messages;
    all.verbs += l.verbs;
    all.refused += l.refused;
    all.pending += l.pending;
    all.max_lag_ns = std::max(all.max_lag_ns, l.max_lag_ns);
    for (auto& [kind, v] : l.latency_ns)
      all.latency_ns[kind].insert(all.latency_ns[kind].end(), v.begin(), v.end());
    all.verb_latency_ns.insert(all.verb_latency_ns.end(), l.verb_latency_ns.begin(),
                               l.verb_latency_ns.end());
    merge_seconds(all.verb_latency_by_second, l.verb_latency_by_second);
  }
  all.latency_ns["verbs"] = std::move(all.verb_latency_ns);
  nlohmann::json j;
  j["offered_steps_per_s_per_engine"] = steps_per_s;
  j["offered_steps_per_s"] = steps_per_s * args.clients;
  j["achieved_steps_per_s"] = static_cast<double>(all.steps) / args.seconds;
  j["messages_per_s"] = static_cast<double>(all.messages) / args.seconds;
  j["verb_calls_per_s"] = static_cast<double>(all.verbs) / args.seconds;
  j["refused_admissions"] = all.refused;
  j["pending_allocations"] = all.pending;
  j["max_lag_ms"] = static_cast<double>(all.max_lag_ns) / 1e6;
  for (auto& [kind, v] : all.latency_ns)
    j["rows"][kind] = {{"count", v.size()}, {"p50_us", percentile_us(v, 0.5)},
                       {"p99_us", percentile_us(v, 0.99)},
                       {"p999_us", percentile_us(v, 0.999)}};
  add_start_up(j, all.verb_latency_by_second);
  return j;
}

const char* const verb_rows[] = {"verbs", "lookup", "allocate", "step"};

void write_csv(const std::string& path, const nlohmann::json& points) {
  std::ofstream f(path);
  f << "offered_steps_per_s_per_engine,offered_steps_per_s,achieved_steps_per_s,"
       "verb_calls_per_s,max_lag_ms,within";
  for (const char* row : verb_rows)
    f << ',' << row << "_p50_us," << row << "_p99_us," << row << "_p999_us";
  f << '\n';
  for (const auto& p : points) {
    f << p["offered_steps_per_s_per_engine"].get<double>() << ','
      << p["offered_steps_per_s"].get<double>() << ',' << p["achieved_steps_per_s"].get<double>()
      << ',' << p["verb_calls_per_s"].get<double>() << ',' << p["max_lag_ms"].get<double>() << ','
      << (p["within"].get<bool>() ? 1 : 0);
    for (const char* row : verb_rows)
      for (const char* q : {"p50_us", "p99_us", "p999_us"})
        f << ',' << (p["rows"].contains(row) ? p["rows"][row][q].get<double>() : 0.0);
    f << '\n';
  }
  if (!f)
    throw std::runtime_error("--csv " + path + ": cannot write");
}

}  // namespace

int run_open_loop(const bench_serve_args& args, const replay_config& rc, const preloaded_trace& t,
                  nlohmann::json& out) {
  out["mode"] = "open";
  out["kvtier_version"] = build_line();
  out["engines"] = args.clients;
  out["new_per_step"] = args.new_per_step;
  out["seconds_per_point"] = args.seconds;
  out["p99_bound_us"] = args.p99_bound_us;
  out["client_io_threads"] = args.io_threads;
  out["points"] = nlohmann::json::array();
  std::printf("kvtier: %s\n", build_line().c_str());
  std::printf("open loop, %u engines, %u new requests per step, %.1f s per load; saturation: "
              "achieved >= 95%% of offered and verb p99 < %.0f us\n",
              args.clients, args.new_per_step, args.seconds, args.p99_bound_us);
  std::printf("%12s %10s %10s %10s %9s %9s %9s %9s %9s %9s\n", "steps/s/eng", "offered",
              "achieved", "verbs/s", "p50 us", "p99 us", "p999 us", "lkp p99", "alloc p99",
              "step p99");
  double saturation = 0;
  for (double rate : args.steps_per_s) {
    std::fprintf(stderr, "bench serve --open: %.0f steps/s per engine\n", rate);
    nlohmann::json p = run_point(args, rc, t, rate);
    double p99 = p["rows"]["verbs"]["p99_us"].get<double>();
    bool within = p["achieved_steps_per_s"].get<double>() >= 0.95 * p["offered_steps_per_s"]
                                                                   .get<double>() &&
                  p99 < args.p99_bound_us;
    p["within"] = within;
    if (within)
      saturation = std::max(saturation, rate);
    auto q = [&](const char* row, const char* k) {
      return p["rows"].contains(row) ? p["rows"][row][k].get<double>() : 0.0;
    };
    std::printf("%12.0f %10.0f %10.0f %10.0f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f%s\n", rate,
                p["offered_steps_per_s"].get<double>(), p["achieved_steps_per_s"].get<double>(),
                p["verb_calls_per_s"].get<double>(), q("verbs", "p50_us"), p99,
                q("verbs", "p999_us"), q("lookup", "p99_us"), q("allocate", "p99_us"),
                q("step", "p99_us"), within ? "" : "  (beyond)");
    std::printf("%12s first second's verb p99 %.1f us, after it %.1f us (%.2fx)\n", "",
                p["first_second_verb_p99_us"].get<double>(),
                p["after_first_second_verb_p99_us"].get<double>(),
                p["first_second_over_steady"].get<double>());
    std::fflush(stdout);
    out["points"].push_back(std::move(p));
  }
  out["saturation_steps_per_s_per_engine"] = saturation;
  out["saturation_steps_per_s"] = saturation * args.clients;
  std::printf("saturation: %.0f steps/s per engine (%.0f in all)\n", saturation,
              saturation * args.clients);
  if (!args.csv_out.empty())
    write_csv(args.csv_out, out["points"]);
  return 0;
}

}  // namespace kvtier
