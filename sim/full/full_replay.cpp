#include "sim/full/full_replay.hpp"

#include <stdexcept>
#include <thread>

#include "caf/scheduler/test_coordinator.hpp"

#include "runtime/config/options.hpp"
#include "runtime/deployment.hpp"
#include "sim/full/cluster_sum.hpp"
#include "sim/full/watchdog.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

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

// Points every controller's block events at the sampler, timed on the replay's clock; the guard
// stops it before the clock and the actor system it reads go away.
struct sampling {
  sampling(deployment_plan& plan, tier_occupancy_sampler* s, std::function<int64_t()> now)
    : sampler(s) {
    if (!sampler)
      return;
    sampler->start(std::move(now));
    for (instance_config& ic : plan.instances)
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

full_result result_of(const deployment_plan& plan) {
  full_result r;
  r.disaggregated = plan.disaggregated();
  r.pd_mode = plan.front.pd.transfer;
  return r;
}

full_result run_virtual(deployment_plan plan, std::shared_ptr<request_feed> feed,
                        const full_run_options& options) {
  prepare_storage(plan);
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
  caf::actor_system sys{cfg};
  auto& coordinator = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  sim_clock clock(sys.clock().now(), 1.0);
  sampling sampled(plan, options.occupancy, [&] { return clock.now(sys.clock()); });
  deployment d = spawn_deployment(sys, plan, clock, std::move(feed));
  caf::scoped_actor self{sys, true};
  watchdog dog(sys, d);
  auto run = self->request(d.front_end, caf::infinite, run_atom_v);
  full_result r = result_of(plan);
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
    stop_deployment(d);
    coordinator.run();
    raise(failure);
  }
  collect_reports(self, d, r, [&] { coordinator.run(); });
  stop_deployment(d);
  coordinator.run();
  return r;
}

// Until no instance holds or moves anything.
void wait_idle(caf::scoped_actor& self, const deployment& d) {
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
}

full_result run_wall(deployment_plan plan, std::shared_ptr<request_feed> feed,
                     const full_run_options& options) {
  std::shared_ptr<cuda_device> gpu = prepare_gpu(plan);
  prepare_storage(plan);
  caf::actor_system_config cfg;
  configure_wall_clock(cfg, options.threads);
  caf::actor_system sys{cfg};
  sim_clock clock(sys.clock().now(), options.speed, clock_mode::wall);
  sampling sampled(plan, options.occupancy, [&] { return clock.now(sys.clock()); });
  deployment d = spawn_deployment(sys, plan, clock, std::move(feed));
  caf::scoped_actor self{sys};
  full_result r = result_of(plan);
  if (gpu)
    r.startup = gpu->startup();
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
      stop_deployment(d);
      throw;
    }
  }
  caf::error failure;
  run.receive([](const front_end_report&) {}, [&](caf::error& e) { failure = std::move(e); });
  if (failure) {
    stop_deployment(d);
    raise(failure);
  }
  wait_idle(self, d);
  r.last_event_ns = clock.now(sys.clock());
  collect_reports(self, d, r, [] {});
  stop_deployment(d);
  return r;
}

}  // namespace

full_result run_full_replay(deployment_plan plan, std::shared_ptr<request_feed> feed,
                            const full_run_options& options) {
  if (plan.backend == copy_backend_kind::cuda && options.mode != clock_mode::wall)
    throw std::invalid_argument("the CUDA backend runs on the wall clock only");
  if (does_real_io(plan.storage.backend.kind) && options.mode != clock_mode::wall)
    throw config_error(std::string("storage.backend=") + to_string(plan.storage.backend.kind) +
                       " does real I/O: it runs on the wall clock only (--clock wall)");
  if (options.mode == clock_mode::virtual_time)
    return run_virtual(std::move(plan), std::move(feed), options);
  return run_wall(std::move(plan), std::move(feed), options);
}

}  // namespace kvtier
