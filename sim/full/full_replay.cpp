#include "sim/full/full_replay.hpp"

#include <stdexcept>
#include <thread>

#include "caf/scheduler/test_coordinator.hpp"

#include "actors/front_end/front_end.hpp"
#include "actors/instance.hpp"
#include "actors/storage/storage.hpp"
#include "sim/config/options.hpp"
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
  if (!config.cuda)
    return;
  config.engine.gpu = std::make_shared<cuda_device>(config.cuda_options);
  config.engine.block_bytes = config.engine.gpu->block_bytes();
}

instance_config instance_of(const timed_config& config, const sim_clock& clock) {
  instance_config ic;
  ic.cache = config.cache;
  ic.controller = config.controller;
  ic.scheduler = config.scheduler;
  ic.scheduler.clock = clock;
  ic.engine = config.engine;
  ic.engine.clock = clock;
  return ic;
}

deployment spawn_all(caf::actor_system& sys, timed_config config,
                     std::shared_ptr<request_feed> feed, const sim_clock& clock) {
  config.storage.clock = clock;
  deployment d;
  d.storage = spawn_storage(sys, config.storage);
  d.instances.push_back(spawn_instance(sys, instance_of(config, clock), d.storage));
  front_end_config fc;
  fc.time_scale = config.time_scale;
  fc.clock = clock;
  std::vector<scheduler_actor> schedulers;
  for (const instance& x : d.instances)
    schedulers.push_back(x.scheduler);
  d.front_end = spawn_front_end(sys, fc, std::move(feed), std::move(schedulers));
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
  const instance& x = d.instances.front();
  ask(x.scheduler, r.scheduler);
  ask(x.controller, r.controller);
  ask(x.engine, r.engine);
  ask(d.storage, r.storage);
  ask(d.front_end, r.front_end);
  r.drained = r.front_end.exhausted && r.scheduler.drained;
}

void stop_all(const deployment& d) {
  caf::anon_send_exit(d.front_end, caf::exit_reason::user_shutdown);
  for (const instance& x : d.instances)
    stop_instance(x);
  caf::anon_send_exit(d.storage, caf::exit_reason::user_shutdown);
}

full_result run_virtual(const timed_config& config, std::shared_ptr<request_feed> feed,
                        const full_run_options& options) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
  caf::actor_system sys{cfg};
  auto& coordinator = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  sim_clock clock(sys.clock().now(), 1.0);
  deployment d = spawn_all(sys, config, std::move(feed), clock);
  caf::scoped_actor self{sys, true};
  auto run = self->request(d.front_end, caf::infinite, run_atom_v);
  full_result r;
  for (;;) {
    r.messages += coordinator.run();
    if (options.progress)
      options.progress();
    if (!coordinator.trigger_timeout())
      break;
  }
  r.last_event_ns = clock.now(sys.clock());
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
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(options.threads));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  add_kvtier_types(cfg);
  caf::actor_system sys{cfg};
  sim_clock clock(sys.clock().now(), options.speed);
  deployment d = spawn_all(sys, config, std::move(feed), clock);
  caf::scoped_actor self{sys};
  full_result r;
  // Wait for the front end's answer (every request done), then until no instance holds or moves
  // anything. The answer is polled for, so that progress is drawn meanwhile.
  caf::scoped_actor runner{sys};
  auto run = runner->request(d.front_end, caf::infinite, run_atom_v);
  while (runner->mailbox().size() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (options.progress)
      options.progress();
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
  if (config.cuda && options.mode != clock_mode::wall)
    throw std::invalid_argument("the CUDA backend runs on the wall clock only");
  if (options.mode == clock_mode::virtual_time)
    return run_virtual(config, std::move(feed), options);
  return run_wall(config, std::move(feed), options);
}

}  // namespace kvtier
