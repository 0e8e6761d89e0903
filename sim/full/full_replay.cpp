#include "sim/full/full_replay.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <thread>

#include "caf/scheduler/test_coordinator.hpp"

#include "actors/front_end/front_end.hpp"
#include "actors/instance.hpp"
#include "actors/transfer_engine/cuda_copies.hpp"
#include "actors/storage/storage.hpp"
#include "runtime/deployment.hpp"
#include "runtime/config/options.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

struct deployment {
  storage_actor storage;
  std::vector<instance> instances;
  front_end_actor front_end;
};

// Real backend: the CUDA cache is made (device and pinned host memory allocated, compute
// calibrated) before the replay's clock starts, so no request is charged for it.
void prepare_backend(timed_config& config) {
  if (config.backend != copy_backend_kind::cuda)
    return;
  use_cuda_copies(config.engine, std::make_shared<cuda_device>(config.cuda_options),
                  config.cuda_options.verify ? copy_checks::verify : copy_checks::none);
}


std::vector<instance_config> instances_of(const timed_config& config, const sim_clock& clock) {
  std::vector<instance_config> out = config.instances;
  if (out.empty()) {
    instance_config ic;
    ic.cache = config.cache;
    ic.controller = config.controller;
    ic.scheduler = config.scheduler;
    ic.engine = config.engine;
    out.push_back(std::move(ic));
  }
  for (instance_config& ic : out) {
    ic.scheduler.clock = clock;
    ic.controller.clock = clock;
    ic.engine.clock = clock;
    ic.engine.storage_payload_bytes = config.engine.storage_payload_bytes;
    // storage.max_inflight_bytes bounds the process: each instance's engine takes its share.
    ic.engine.storage_inflight_bytes = config.engine.storage_inflight_bytes / out.size();
    ic.remote_controller = config.remote_controller;
    ic.remote_compute = config.remote_compute;
  }
  return out;
}

// -- a cluster's reports, summed ---------------------------------------------------------------

void add_to(scheduler_report& sum, const scheduler_report& x) {
  sum.requests.insert(sum.requests.end(), x.requests.begin(), x.requests.end());
  sum.steps += x.steps;
  sum.probes += x.probes;
  sum.preemptions += x.preemptions;
  sum.recomputed_tokens += x.recomputed_tokens;
  sum.layer_wait_ns += x.layer_wait_ns;
  sum.layer_gap_ns += x.layer_gap_ns;
  sum.reuse_wait_ns += x.reuse_wait_ns;
  sum.step_log.insert(sum.step_log.end(), x.step_log.begin(), x.step_log.end());
  sum.busy_ns += x.busy_ns;
  sum.prefill_tokens += x.prefill_tokens;
  sum.decode_tokens += x.decode_tokens;
  sum.rejected += x.rejected;
  sum.refused_admissions += x.refused_admissions;
  sum.drained = sum.drained && x.drained;
  for (tier t : all_tiers)
    at(sum.restored_tokens, t) += at(x.restored_tokens, t);
  sum.pd_link_bytes += x.pd_link_bytes;
  sum.pd_link_busy_ns += x.pd_link_busy_ns;
  sum.pd_link_messages += x.pd_link_messages;
  sum.handoff_blocks_sent += x.handoff_blocks_sent;
  sum.handoff_blocks_skipped += x.handoff_blocks_skipped;
  sum.handoff_reads += x.handoff_reads;
  sum.handoff_read_failures += x.handoff_read_failures;
  sum.preallocations += x.preallocations;
  sum.preallocation_refusals += x.preallocation_refusals;
  sum.output_cache_writes += x.output_cache_writes;
  sum.output_cache_blocks += x.output_cache_blocks;
  sum.decode_drops += x.decode_drops;
  sum.decode_drop_writes += x.decode_drop_writes;
  sum.decode_drop_write_blocks += x.decode_drop_write_blocks;
  sum.decode_drop_write_timeouts += x.decode_drop_write_timeouts;
  sum.decode_drop_write_wait_ns += x.decode_drop_write_wait_ns;
}

// PD: one record per request from its prefill record and its decode record; requests that never
// reached a prefill instance from the front end's. A request a decode instance dropped has a
// record per pass on each side (records come in pass order): the first prefill pass gives its
// arrival, admission, hits and first token; the last decode pass its finish; work and
// preemptions add up over every pass.
std::vector<request_record> join_handoffs(const std::vector<instance_result>& instances,
                                          const front_end_report& front) {
  std::map<request_id, request_record> joined;
  for (const instance_result& x : instances)
    if (x.role == pd_role::prefill)
      for (const request_record& q : x.scheduler.requests)
        if (q.attempt == 0)
          joined[q.req] = q;
  for (const instance_result& x : instances)
    if (x.role == pd_role::prefill)
      for (const request_record& q : x.scheduler.requests) {
        auto it = joined.find(q.req);
        if (q.attempt == 0 || it == joined.end())
          continue;
        it->second.computed_tokens += q.computed_tokens;
        it->second.recomputed_tokens += q.recomputed_tokens;
        it->second.late_hit_tokens += q.late_hit_tokens;
        it->second.preemptions += q.preemptions;
      }
  std::map<request_id, uint32_t> last_pass;
  for (const instance_result& x : instances)
    if (x.role == pd_role::decode)
      for (const request_record& q : x.scheduler.requests)
        last_pass[q.req] = std::max(last_pass[q.req], q.attempt);
  for (const instance_result& x : instances) {
    if (x.role != pd_role::decode)
      continue;
    for (const request_record& q : x.scheduler.requests) {
      auto it = joined.find(q.req);
      if (it == joined.end())
        continue;  // preallocated, then rejected by the prefill instance
      request_record& r = it->second;
      if (q.attempt == 0) {
        r.output_tokens = q.output_tokens;
        r.first_token_ns = q.first_token_ns;
      }
      if (q.attempt == last_pass[q.req]) {
        r.finish_ns = q.finish_ns;
        r.failed = q.failed;
      }
      r.preemptions += q.preemptions;
      r.computed_tokens += q.computed_tokens;  // a failed handoff D recomputed
      r.recomputed_tokens += q.recomputed_tokens;
      r.late_hit_tokens += q.late_hit_tokens;
    }
  }
  for (const request_record& q : front.never_prefilled) {
    auto it = joined.find(q.req);
    if (it == joined.end()) {
      joined[q.req] = q;
      continue;
    }
    it->second.finish_ns = -1;  // its next pass never reached a prefill instance
    it->second.rejected = q.rejected;
    it->second.failed = q.failed;
  }
  std::vector<request_record> out;
  out.reserve(joined.size());
  for (auto& [id, r] : joined)
    out.push_back(std::move(r));
  return out;
}

void add_to(controller_report& sum, const controller_report& x, const std::string& name) {
  for (auto [to, from] : {std::pair{&sum.device_evictions, x.device_evictions},
                          {&sum.host_evictions, x.host_evictions}, {&sum.dropped, x.dropped},
                          {&sum.backups, x.backups}, {&sum.backups_skipped, x.backups_skipped},
                          {&sum.write_backs, x.write_backs}, {&sum.swap_ins, x.swap_ins},
                          {&sum.loads, x.loads}, {&sum.stores, x.stores},
                          {&sum.storage_probes, x.storage_probes},
                          {&sum.failed_loads, x.failed_loads}, {&sum.transfers, x.transfers},
                          {&sum.invariant_checked, x.invariant_checked},
                          {&sum.invariant_violations, x.invariant_violations},
                          {&sum.preemption.saved_blocks, x.preemption.saved_blocks},
                          {&sum.preemption.d2h_blocks, x.preemption.d2h_blocks},
                          {&sum.preemption.stored_blocks, x.preemption.stored_blocks},
                          {&sum.preemption.unsaved_blocks, x.preemption.unsaved_blocks},
                          {&sum.preemption.named_blocks, x.preemption.named_blocks},
                          {&sum.preemption.readmission_lookups, x.preemption.readmission_lookups},
                          {&sum.preemption.marginal_d2h_blocks, x.preemption.marginal_d2h_blocks},
                          {&sum.preemption.marginal_stored_blocks,
                           x.preemption.marginal_stored_blocks},
                          {&sum.prefetch.started, x.prefetch.started},
                          {&sum.prefetch.below_threshold, x.prefetch.below_threshold},
                          {&sum.prefetch.ready_early, x.prefetch.ready_early},
                          {&sum.prefetch.timeouts, x.prefetch.timeouts},
                          {&sum.prefetch.protected_holds, x.prefetch.protected_holds},
                          {&sum.prefetch.protected_released, x.prefetch.protected_released},
                          {&sum.prefetch.wasted_blocks, x.prefetch.wasted_blocks},
                          {&sum.prefetch.admission_lookups, x.prefetch.admission_lookups}})
    *to += from;
  for (const std::string& m : x.invariant_messages)
    sum.invariant_messages.push_back(name + ": " + m);
  sum.tree_nodes += x.tree_nodes;
  sum.device_used += x.device_used;
  sum.host_used += x.host_used;
  sum.swap_ins_by_request.insert(sum.swap_ins_by_request.end(), x.swap_ins_by_request.begin(),
                                 x.swap_ins_by_request.end());
}

void add_to(engine_report& sum, const engine_report& x) {
  for (const link_report& l : x.links) {
    auto it = std::find_if(sum.links.begin(), sum.links.end(),
                           [&](const link_report& s) { return s.name == l.name; });
    if (it == sum.links.end()) {
      sum.links.push_back(l);
      continue;
    }
    it->bytes += l.bytes;
    it->busy_ns += l.busy_ns;
    it->transfers += l.transfers;
  }
  for (size_t k = 0; k < transfer_kind_count; ++k) {
    sum.transfers[k] += x.transfers[k];
    sum.bytes[k] += x.bytes[k];
  }
  sum.failed += x.failed;
  sum.payload_errors += x.payload_errors;
  sum.store_waits += x.store_waits;
  sum.store_wait_ns += x.store_wait_ns;
  sum.storage_inflight_peak_bytes += x.storage_inflight_peak_bytes;  // an upper bound: peaks add
  sum.backend = x.backend;
  sum.device = x.device;
  sum.log.insert(sum.log.end(), x.log.begin(), x.log.end());
}

void sum_instances(full_result& r) {
  r.scheduler = {};
  r.scheduler.drained = true;
  r.controller = {};
  r.engine = {};
  for (const instance_result& x : r.instances) {
    add_to(r.scheduler, x.scheduler);
    add_to(r.controller, x.controller, x.name);
    add_to(r.engine, x.engine);
  }
  std::sort(r.scheduler.requests.begin(), r.scheduler.requests.end(),
            [](const request_record& a, const request_record& b) {
              return a.req != b.req ? a.req < b.req : a.attempt < b.attempt;
            });
  if (r.disaggregated)
    r.scheduler.requests = join_handoffs(r.instances, r.front_end);
}

deployment spawn_all(caf::actor_system& sys, timed_config config,
                     std::shared_ptr<request_feed> feed, const sim_clock& clock) {
  config.storage.clock = clock;
  deployment d;
  d.storage = spawn_storage(sys, config.storage);
  for (const instance_config& ic : instances_of(config, clock))
    d.instances.push_back(spawn_instance(sys, ic, d.storage));
  front_end_config fc;
  fc.time_scale = config.time_scale;
  fc.router = config.router;
  fc.clock = clock;
  fc.disaggregated = config.disaggregated;
  fc.pd = config.pd;
  std::vector<front_end_target> targets;
  for (const instance& x : d.instances)
    targets.push_back({x.scheduler, x.controller, x.role});
  d.front_end = spawn_front_end(sys, fc, std::move(feed), std::move(targets));
  return d;
}

// Bad input the front end met is raised as the error the command line expects.
[[noreturn]] void raise(const caf::error& e) {
  if (auto p = input_problem_of(e)) {
    if (p->what == input_problem::kind::config)
      throw config_error(p->message);
    throw trace_error(p->file, p->line, p->field, p->message);
  }
  throw std::runtime_error(caf::to_string(e));
}

// Asks every actor for its report; `pump` runs the system while a request waits (virtual time
// needs it, the wall clock does not).
template <class Pump>
void collect_reports(caf::scoped_actor& self, const deployment& d, full_result& r, Pump pump) {
  auto ask = [&](auto handle, auto& out) {
    auto pending = self->request(handle, caf::infinite, report_atom_v);
    pump();
    pending.receive([&](std::decay_t<decltype(out)>& x) { out = std::move(x); },
                    [&](const caf::error& e) { raise(e); });
  };
  if (d.instances.size() == 1) {
    const instance& x = d.instances.front();
    ask(x.scheduler, r.scheduler);
    ask(x.controller, r.controller);
    if (x.engine)
      ask(x.engine, r.engine);
  } else {
    for (const instance& x : d.instances) {
      instance_result one;
      one.name = x.name;
      one.role = x.role;
      ask(x.scheduler, one.scheduler);
      ask(x.controller, one.controller);
      ask(x.engine, one.engine);
      r.instances.push_back(std::move(one));
    }
  }
  ask(d.storage, r.storage);
  ask(d.front_end, r.front_end);
  if (!r.instances.empty())
    sum_instances(r);
  r.drained = r.front_end.exhausted && r.scheduler.drained;
}

// Watches every actor of a deployment: an actor that stops on its own (an exception, a peer
// gone) would leave the requests it held unanswered, so the run ends with what stopped it
// instead of waiting forever.
class watchdog {
 public:
  watchdog(caf::actor_system& sys, const deployment& d) : self_(sys, true) {
    watch(d.storage, "storage");
    watch(d.front_end, "front end");
    for (const instance& x : d.instances) {
      watch(x.scheduler, x.name + " scheduler");
      watch(x.controller, x.name + " cache controller");
      if (x.engine)
        watch(x.engine, x.name + " transfer engine");
      if (x.compute)
        watch(x.compute, x.name + " GPU compute");
    }
  }

  /// Throws if an actor has stopped.
  void check() {
    if (self_->mailbox().size() == 0)
      return;
    std::string what;
    self_->receive([&](caf::down_msg& m) {
      what = "the " + names_[m.source] + " actor stopped: " + caf::to_string(m.reason);
    });
    throw std::runtime_error(what);
  }

 private:
  template <class Handle>
  void watch(const Handle& h, std::string name) {
    names_[caf::actor_cast<caf::actor_addr>(h)] = std::move(name);
    self_->monitor(h);
  }

  caf::scoped_actor self_;
  std::map<caf::actor_addr, std::string> names_;
};

// Points every controller's block events at the sampler, timed on the replay's clock; the guard
// stops it before the clock and the actor system it reads go away.
struct sampling {
  sampling(timed_config& config, tier_occupancy_sampler* s, std::function<int64_t()> now)
    : sampler(s) {
    if (!sampler)
      return;
    sampler->start(std::move(now));
    config.controller.events = sampler;
    for (instance_config& ic : config.instances)
      ic.controller.events = sampler;
  }
  ~sampling() {
    if (sampler)
      sampler->stop();
  }
  sampling(const sampling&) = delete;
  sampling& operator=(const sampling&) = delete;

  tier_occupancy_sampler* sampler;
};

void stop_all(const deployment& d) {
  caf::anon_send_exit(d.front_end, caf::exit_reason::user_shutdown);
  for (const instance& x : d.instances)
    stop_instance(x);
  caf::anon_send_exit(d.storage, caf::exit_reason::user_shutdown);
}

full_result run_virtual(timed_config config, std::shared_ptr<request_feed> feed,
                        const full_run_options& options) {
  prepare_storage(config);
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
  caf::actor_system sys{cfg};
  auto& coordinator = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  sim_clock clock(sys.clock().now(), 1.0);
  sampling sampled(config, options.occupancy, [&] { return clock.now(sys.clock()); });
  deployment d = spawn_all(sys, config, std::move(feed), clock);
  caf::scoped_actor self{sys, true};
  watchdog dog(sys, d);
  auto run = self->request(d.front_end, caf::infinite, run_atom_v);
  config.storage.backend.reset();  // the storage actor owns it now: it goes before the system
  full_result r;
  r.disaggregated = config.disaggregated;
  r.pd_mode = config.pd.transfer;
  for (;;) {
    r.messages += coordinator.run();
    if (options.progress)
      options.progress();
    if (!coordinator.trigger_timeout())
      break;
  }
  r.last_event_ns = clock.now(sys.clock());
  dog.check();
  if (self->mailbox().size() == 0)
    throw std::runtime_error("the replay stalled: nothing more can happen, and requests are "
                             "still in flight");
  caf::error failure;
  run.receive([](const front_end_report&) {}, [&](caf::error& e) { failure = std::move(e); });
  if (failure) {
    stop_all(d);
    coordinator.run();
    raise(failure);
  }
  collect_reports(self, d, r, [&] { coordinator.run(); });
  stop_all(d);
  coordinator.run();
  return r;
}

full_result run_wall(timed_config config, std::shared_ptr<request_feed> feed,
                     const full_run_options& options) {
  prepare_backend(config);
  prepare_storage(config);
  caf::actor_system_config cfg;
  configure_wall_clock(cfg, options.threads);
  caf::actor_system sys{cfg};
  sim_clock clock(sys.clock().now(), options.speed, clock_mode::wall);
  sampling sampled(config, options.occupancy, [&] { return clock.now(sys.clock()); });
  deployment d = spawn_all(sys, config, std::move(feed), clock);
  config.storage.backend.reset();  // the storage actor owns it now: it goes before the system
  caf::scoped_actor self{sys};
  full_result r;
  r.disaggregated = config.disaggregated;
  r.pd_mode = config.pd.transfer;
  if (config.engine.gpu)
    r.startup = config.engine.gpu->startup();
  // Wait for the front end's answer (every request done), then until no instance holds or moves
  // anything. The answer is polled for, so that progress is drawn meanwhile.
  caf::scoped_actor runner{sys};
  watchdog dog(sys, d);
  auto run = runner->request(d.front_end, caf::infinite, run_atom_v);
  while (runner->mailbox().size() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (options.progress)
      options.progress();
    if (options.on_poll)
      options.on_poll(clock.now(sys.clock()));
    try {
      dog.check();
    } catch (...) {
      stop_all(d);
      throw;
    }
  }
  caf::error failure;
  run.receive([](const front_end_report&) {}, [&](caf::error& e) { failure = std::move(e); });
  if (failure) {
    stop_all(d);
    raise(failure);
  }
  for (bool idle = false; !idle;) {
    for (const instance& x : d.instances) {
      self->request(x.controller, caf::infinite, caf::get_atom_v)
        .receive([&](bool y) { idle = y; }, [&](const caf::error& e) { raise(e); });
      if (!idle)
        break;
    }
    if (!idle)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.last_event_ns = clock.now(sys.clock());
  collect_reports(self, d, r, [] {});
  stop_all(d);
  return r;
}

}  // namespace

full_result run_full_replay(const timed_config& config, std::shared_ptr<request_feed> feed,
                            const full_run_options& options) {
  if (config.backend == copy_backend_kind::cuda && options.mode != clock_mode::wall)
    throw std::invalid_argument("the CUDA backend runs on the wall clock only");
  const std::string& kind = config.storage_backend.kind;
  if ((kind == "redis" || kind == "redis_cluster" || kind == "file") &&
      options.mode != clock_mode::wall)
    throw config_error("storage.backend=" + kind + " does real I/O: it runs on the wall clock "
                       "only (--clock wall)");
  if (options.mode == clock_mode::virtual_time)
    return run_virtual(config, std::move(feed), options);
  return run_wall(config, std::move(feed), options);
}

}  // namespace kvtier
