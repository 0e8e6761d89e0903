#include "serve/server.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <zmq.hpp>

#include "actors/cache_controller/cache_controller.hpp"
#include "gpu/device_info.hpp"
#include "actors/storage/storage.hpp"
#include "actors/transfer_engine/cuda_copies.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"
#include "serve/observe/serve_wiring.hpp"
#include "serve/encode.hpp"
#include "serve/server_actor.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/fault_config.hpp"
#include "runtime/deployment.hpp"
#include "runtime/config/timed_config.hpp"

namespace kvtier::serve {

namespace {

// The signal handler only sets the flag and wakes the socket thread.
std::atomic<bool> stop_requested{false};
std::atomic<int> wake_fd{-1};

extern "C" void on_signal(int) {
  stop_requested = true;
  int fd = wake_fd.load();
  if (fd >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
  }
}

// Replies the actor leaves for the socket thread. The actor writes the eventfd only when the
// socket thread is about to sleep, or sleeps: awake, it looks at the box before it polls again.
// (Written for every reply into an empty box, the eventfd took 6% of the actors' thread and woke
// the socket thread for replies it had already sent.)
struct outbox {
  std::mutex mutex;
  std::deque<std::pair<uint64_t, std::string>> items;
  int fd = -1;
  std::atomic<bool> sleeping{false};

  void push(uint64_t conn, std::string bytes) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      items.emplace_back(conn, std::move(bytes));
    }
    if (sleeping.exchange(false))
      wake();
  }
  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
  }
  /// The socket thread, before it polls: false if a reply is waiting (then it must not sleep).
  bool may_sleep() {
    sleeping = true;
    std::lock_guard<std::mutex> guard(mutex);
    if (items.empty())
      return true;
    sleeping = false;
    return false;
  }
};

// A client's routing envelope (its identity, and the empty delimiter a REQ socket adds).
struct envelope {
  std::string identity;
  bool delimiter = false;
};


}  // namespace

bool is_local_endpoint(const std::string& e) {
  if (e.rfind("ipc://", 0) == 0 || e.rfind("inproc://", 0) == 0)
    return true;
  for (const char* p : {"tcp://127.0.0.1:", "tcp://localhost:", "tcp://[::1]:"})
    if (e.rfind(p, 0) == 0)
      return true;
  return false;
}

namespace {

// SIGTERM and SIGINT ask for a clean stop from the moment the server starts (a signal during
// start-up is kept, not fatal); the previous handlers come back when it returns or throws.
class stop_signals {
 public:
  stop_signals() {
    stop_requested = false;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGINT, &sa, &old_int_);
  }
  ~stop_signals() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGINT, &old_int_, nullptr);
  }

 private:
  struct sigaction old_term_ {}, old_int_ {};
};

}  // namespace

int run_server(const serve_job& job) {
  stop_signals signals;
  if (!is_local_endpoint(job.bind) && job.token.empty())
    throw config_error("--bind " + job.bind + " is reachable from other machines: give --token "
                       "(every request must then carry it)");
  if (job.bind.empty())
    throw config_error("--bind: empty endpoint");
  replay_config rc = resolve(job.cfg);
  timed_config t = resolve_timed(job.cfg, rc);
  if (!t.instances.empty())
    throw config_error("cluster.instances: kvtier serve runs one instance (the engine's); "
                       "remove cluster.instances");
  if (resolve_faults(job.cfg, 0, rc.storage_nodes, rc.storage_blocks).any())
    throw config_error("faults.*: faults are deterministic in virtual time only; kvtier serve "
                       "runs on the wall clock");
  const double timeout_s = job.cfg.number(keys::serve::client_timeout_s);
  const uint64_t max_bytes = static_cast<uint64_t>(job.cfg.integer(keys::serve::max_message_bytes));
  std::shared_ptr<cuda_device> gpu;
  if (job.backend == copy_backend_kind::cuda) {
    if (!gpu::cuda_built())
      throw config_error("--backend cuda: this kvtier was built without CUDA (configure with "
                         "KVTIER_CUDA=ON on a machine with the CUDA toolkit)");
    cuda_device_options o;
    o.shape = {rc.model.layers, rc.model.kv_heads, rc.model.head_dim, rc.block_size,
               rc.model.dtype_bytes};
    o.device_blocks = rc.cache.device_blocks;
    o.host_blocks = rc.cache.host_blocks;
    o.verify = job.verify;
    o.attach_later = true;  // the engine's tensors come with its hello
    gpu = std::make_shared<cuda_device>(o);
    use_cuda_copies(t.engine, gpu, job.verify ? copy_checks::verify : copy_checks::none);
    // The reply of a step goes before its swap-in lands: the engine waits on IPC events.
    t.controller.grant_early = true;
    t.controller.verify = job.verify;
  } else if (job.verify) {
    throw config_error("--verify checks real bytes: it needs --backend cuda");
  }
  prepare_storage(t);
  // KV events (serve/observe/): made before the actors, which report to its sink until they end.
  std::unique_ptr<serve_events> events = open_events(job);
  t.controller.events = events->sink();

  caf::actor_system_config cfg;
  // One worker: a call crosses the server actor, the controller and storage, and on one worker
  // each crossing is a queue push, not a wake-up of another thread (which, with the socket
  // thread's, dominated a call's cost: most of its time went to context switches).
  configure_wall_clock(cfg, 1);
  caf::actor_system sys{cfg};
  sim_clock clock(sys.clock().now(), job.speed, clock_mode::wall);
  t.storage.clock = clock;
  t.engine.clock = clock;
  storage_actor storage = spawn_storage(sys, t.storage);
  t.storage.backend.reset();
  transfer_engine_actor engine = spawn_transfer_engine(sys, t.engine, storage);
  if (gpu) {
    // Copy completions come on a CUDA thread: messages to the engine, held weakly so that one
    // after shutdown goes nowhere.
    auto weak = caf::actor_cast<caf::weak_actor_ptr>(engine);
    gpu->set_sinks(
      [weak](uint64_t op, int layer) {
        if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak))
          caf::anon_send(caf::actor_cast<transfer_engine_actor>(strong), gpu_done_atom_v, op,
                         static_cast<int32_t>(layer));
      },
      nullptr);
  }
  cache_controller_actor controller =
    spawn_cache_controller(sys, t.cache, t.controller, storage, engine);
  caf::scoped_actor self{sys};
  auto stop_actors = [&](caf::actor server) {
    if (server)
      caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(controller, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(engine, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
  };

  // A restarted pool: index what the backend still holds, before any call is taken.
  uint64_t rebuilt = 0;
  self->request(storage, caf::infinite, rebuild_atom_v)
    .receive([&](uint64_t n) { rebuilt = n; },
             [&](const caf::error& e) {
               stop_actors(nullptr);
               throw std::runtime_error("storage rebuild failed: " + caf::to_string(e));
             });

  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_bytes * 4 + 1024));
  router.set(zmq::sockopt::rcvhwm, 100000);
  router.set(zmq::sockopt::sndhwm, 100000);
  try {
    router.bind(job.bind);
  } catch (const zmq::error_t& e) {
    stop_actors(nullptr);
    if (e.num() == EADDRINUSE)
      throw std::runtime_error("--bind " + job.bind + ": address in use");
    throw config_error("--bind " + job.bind + ": " + e.what());
  }
  std::string bound = router.get(zmq::sockopt::last_endpoint);
  // GET /metrics (serve/observe/): made after the actors it reads, ends before they do.
  std::unique_ptr<serve_metrics> metrics;
  try {
    metrics = open_metrics(job, {&sys, controller, engine, storage, t.cache.device_blocks,
                                 t.cache.host_blocks, events->publisher()});
  } catch (...) {
    stop_actors(nullptr);
    throw;
  }

  auto box = std::make_shared<outbox>();
  box->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (box->fd < 0) {
    stop_actors(nullptr);
    throw std::runtime_error("eventfd failed");
  }
  server_settings ss;
  ss.token = job.token;
  ss.client_timeout_s = timeout_s;
  ss.max_message_bytes = max_bytes;
  ss.model = {rc.model.name, rc.model.layers, rc.model.kv_heads, rc.model.head_dim,
              rc.model.kv_dtype};
  ss.block_size = rc.block_size;
  ss.layers = rc.model.layers;
  ss.device_blocks = t.cache.device_blocks;
  ss.host_blocks = t.cache.host_blocks;
  ss.storage = t.controller.storage;
  ss.storage_namespace = rc.storage_namespace;
  ss.max_blocks_per_request =
    static_cast<uint64_t>(job.cfg.integer(keys::trace::max_blocks_per_request));
  ss.speed = job.speed;
  ss.epoch = sys.clock().now();
  ss.observers = job.observers;
  ss.gpu = gpu;
  ss.verify = job.verify;
  if (metrics)
    ss.observers.push_back(metrics->observer());
  caf::actor server = spawn_server_actor(
    sys, ss, controller, storage,
    [box](uint64_t conn, std::string bytes) { box->push(conn, std::move(bytes)); });
  if (gpu) {
    auto weak = caf::actor_cast<caf::weak_actor_ptr>(server);
    gpu->set_swap_in_hook([weak](swap_in_signal sig) {
      std::vector<uint64_t> flat;
      flat.reserve(2 * sig.blocks.size());
      for (const gpu::block_pattern& b : sig.blocks) {
        flat.push_back(b.block);
        flat.push_back(b.hash);
      }
      if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak))
        caf::anon_send(caf::actor_cast<caf::actor>(strong), gpu_done_atom_v, sig.transfer,
                       sig.slot, std::move(flat));
    });
  }

  wake_fd = box->fd;
  if (stop_requested) {  // a signal during start-up: the loop must not sleep through it
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(box->fd, &one, sizeof(one));
  }

  if (job.on_ready)
    job.on_ready("kvtier serve: listening on " + bound + " (protocol " +
                 std::to_string(protocol_version) + "; storage index rebuilt: " +
                 std::to_string(rebuilt) + " blocks)");
  if (job.on_ready && events->on())
    job.on_ready(events->ready_line());
  if (job.on_ready && metrics)
    job.on_ready(metrics->ready_line());

  std::unordered_map<std::string, uint64_t> conn_of;
  std::unordered_map<uint64_t, envelope> envelopes;
  uint64_t next_conn = 1;
  std::vector<std::pair<uint64_t, std::string>> batch;

  auto flush_outbox = [&] {
    for (;;) {
      batch.clear();
      {
        std::lock_guard<std::mutex> guard(box->mutex);
        while (!box->items.empty()) {
          batch.push_back(std::move(box->items.front()));
          box->items.pop_front();
        }
      }
      if (batch.empty())
        return;
      for (auto& [conn, bytes] : batch) {
        auto it = envelopes.find(conn);
        if (it == envelopes.end())
          continue;
        const envelope& env = it->second;
        // A client gone meanwhile: ROUTER drops what cannot be routed.
        router.send(zmq::buffer(env.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        if (env.delimiter)
          router.send(zmq::const_buffer(nullptr, 0),
                      zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        router.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
      }
    }
  };

  auto reply_now = [&](const envelope& env, const std::string& bytes) {
    router.send(zmq::buffer(env.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (env.delimiter)
      router.send(zmq::const_buffer(nullptr, 0),
                  zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  };

  // Reads and decodes every call waiting on the socket; hand_over() gives them to the actor.
  std::vector<zmq::message_t> frames;
  inbound_calls inbound;
  auto read_calls = [&] {
    for (int budget = 0; budget < 256; ++budget) {
      frames.clear();
      zmq::message_t part;
      if (!router.recv(part, zmq::recv_flags::dontwait))
        return;
      frames.push_back(std::move(part));
      while (frames.back().more()) {
        zmq::message_t next;
        if (!router.recv(next, zmq::recv_flags::dontwait))
          break;
        frames.push_back(std::move(next));
      }
      envelope env;
      env.identity = frames.front().to_string();
      // [identity, body] (DEALER) or [identity, "", body] (REQ); anything else is not a call.
      bool shape_ok = frames.size() == 2 || (frames.size() == 3 && frames[1].size() == 0);
      env.delimiter = frames.size() == 3;
      if (!shape_ok) {
        env.delimiter = false;
        reply_now(env, encode_error(0, "malformed", "a call is one frame (after a REQ socket's "
                                                    "empty delimiter); got " +
                                                      std::to_string(frames.size() - 1)));
        continue;
      }
      const zmq::message_t& body = frames.back();
      auto [it, fresh] = conn_of.try_emplace(env.identity, next_conn);
      if (fresh)
        ++next_conn;
      envelopes[it->second] = env;
      inbound.calls.push_back(read_call(it->second, body.data<char>(), body.size(), max_bytes,
                                        std::chrono::steady_clock::now()));
    }
  };
  auto hand_over = [&] {
    if (inbound.calls.empty())
      return;
    caf::anon_send(server, std::move(inbound));
    inbound = {};
  };

  zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, box->fd, ZMQ_POLLIN, 0}};
  bool stopping = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  int code = 0;
  for (;;) {
    try {
      bool may_sleep = box->may_sleep();
      zmq::poll(items, 2, std::chrono::milliseconds(!may_sleep ? 0 : stopping ? 5 : -1));
      box->sleeping = false;
    } catch (const zmq::error_t& e) {
      box->sleeping = false;
      if (e.num() != EINTR)
        throw;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(box->fd, &count, sizeof(count));
    }
    flush_outbox();
    if (items[0].revents & ZMQ_POLLIN) {
      read_calls();
      hand_over();
    }
    if (stop_requested && !stopping) {
      stopping = true;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      self->request(server, caf::infinite, run_atom_v)
        .receive([](uint64_t) {}, [](const caf::error&) {});
    }
    if (stopping) {
      // In-flight copies finish: the controller is idle once every transfer has landed.
      bool idle = false;
      self->request(controller, caf::infinite, caf::get_atom_v)
        .receive([&](bool y) { idle = y; }, [&](const caf::error&) { idle = true; });
      if (idle || std::chrono::steady_clock::now() > deadline) {
        if (!idle) {
          std::cerr << "kvtier serve: copies still in flight after 30 s; stopping anyway\n";
          code = 1;
        }
        flush_outbox();
        break;
      }
    }
  }
  wake_fd = -1;
  stop_actors(server);
  self->wait_for(server, controller, engine, storage);
  ::close(box->fd);
  return code;
}

}  // namespace kvtier::serve
