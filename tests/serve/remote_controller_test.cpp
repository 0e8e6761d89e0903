// The client stub (serve/client/remote_controller.hpp): a cache controller whose every message becomes
// a protocol call, against a real `kvtier serve` and against a server that never answers.

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "runtime/deployment.hpp"
#include "serve/client/remote_controller.hpp"
#include "serve/wire/fields.hpp"
#include "serve/wire/session_replies.hpp"
#include "tests/serve/serve_process.hpp"

using namespace kvtier;
using namespace kvtier::serve;
using kvtier::test::serve_process;

namespace {

remote_options options_for(const std::string& endpoint) {
  remote_options o;
  o.endpoint = endpoint;
  o.engine_name = "remote-test";
  o.model.name = "llama3-8b";
  o.model.layers = 32;
  o.model.kv_heads = 8;
  o.model.head_dim = 128;
  o.model.kv_dtype = "bf16";
  o.block_size = 64;
  return o;
}

struct actors {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  actors() {
    configure_wall_clock(cfg, 2);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  sim_clock clock() { return sim_clock(sys->clock().now(), 1.0, clock_mode::wall); }
};

// A server that says hello and then never answers: records the verbs it was sent.
class silent_server {
 public:
  silent_server() : socket_(context_, zmq::socket_type::router) {
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { run(); });
  }
  ~silent_server() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  int calls() const { return calls_; }

 private:
  void run() {
    while (!stop_) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0)
        continue;
      zmq::message_t who, body;
      (void)socket_.recv(who);
      (void)socket_.recv(body);
      msgpack::object_handle h = msgpack::unpack(body.data<char>(), body.size());
      if (wire::str(h.get(), "op") != "hello") {
        ++calls_;
        continue;
      }
      msgpack::sbuffer buf;
      hello_answer a;
      a.engine = 1;
      a.block_size = 64;
      a.layers = 32;
      encode_hello_reply(buf, wire::u64(h.get(), "id"), a);
      socket_.send(who, zmq::send_flags::sndmore);
      socket_.send(zmq::const_buffer(buf.data(), buf.size()));
    }
  }
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("the client stub serves the controller's interface over the protocol",
          "[serve][remote]") {
  serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096"});
  actors a;
  cache_controller_actor rc = spawn_remote_controller(*a.sys, options_for(s.endpoint()),
                                                      a.clock());
  caf::scoped_actor self{*a.sys};
  auto fail = [](const caf::error& e) { FAIL(caf::to_string(e)); };
  std::vector<cache_block> blocks = {{11, 64}, {12, 64}};

  // PD's preallocation has no call in the protocol: answered with an error, not dropped.
  self->request(rc, std::chrono::seconds(10), preallocation{})
    .receive([](const preallocation_result&) { FAIL("a preallocation was granted"); },
             [](const caf::error& e) {
               CHECK_THAT(caf::to_string(e), Catch::Contains("no preallocation"));
             });
  self->request(rc, std::chrono::seconds(10), arrival{1, blocks})
    .receive([](const ready& r) { CHECK(r.req == 1); }, fail);
  self->request(rc, std::chrono::seconds(10), probe{1, {1}, 0, {}})
    .receive(
      [](const probe_reply& r) {
        REQUIRE(r.matches.size() == 1);
        CHECK(r.matches[0].req == 1);
        CHECK(r.matches[0].device_blocks == 0);
        CHECK(r.available_blocks == 16);
      },
      fail);
  commit admit;
  admit.step = 1;
  admit.admits = {{1, 128}};
  self->request(rc, std::chrono::seconds(10), admit)
    .receive(
      [](const grant& g) {
        CHECK(g.step == 1);
        REQUIRE(g.admits.size() == 1);
        CHECK(g.admits[0].req == 1);
        CHECK(g.admits[0].admitted);
        CHECK(g.available_blocks == 14);
      },
      fail);
  commit done;
  done.step = 2;
  done.computed = {{1, 128}};
  done.finished = {1};
  self->request(rc, std::chrono::seconds(10), done).receive([](const grant&) {}, fail);
  self->request(rc, std::chrono::seconds(10), prefix_lookup{blocks})
    .receive([](const prefix_hit& h) { CHECK(h.device_blocks == 2); }, fail);
  self->request(rc, std::chrono::seconds(10), caf::get_atom_v)
    .receive([](bool idle) { CHECK(idle); }, fail);
  self->request(rc, std::chrono::seconds(10), report_atom_v)
    .receive([](const controller_report& r) { CHECK(r.invariant_violations == 0); }, fail);
  caf::anon_send_exit(rc, caf::exit_reason::user_shutdown);
}

TEST_CASE("the client stub does not wait on the socket in its handlers", "[serve][remote]") {
  silent_server server;
  actors a;
  cache_controller_actor rc = spawn_remote_controller(*a.sys, options_for(server.endpoint()),
                                                      a.clock());
  caf::scoped_actor self{*a.sys};
  // The lookup is never answered; a stub that waited for its reply could not answer the next
  // message until the reply timeout.
  self->send(rc, prefix_lookup{{{11, 64}}});
  auto t0 = std::chrono::steady_clock::now();
  self->request(rc, std::chrono::seconds(5), caf::get_atom_v)
    .receive([](bool idle) { CHECK_FALSE(idle); },  // the lookup is still out
             [](const caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  // The lookup did go out (the socket thread sends it; the server reads it a moment later).
  while (server.calls() == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(server.calls() >= 1);
  caf::anon_send_exit(rc, caf::exit_reason::user_shutdown);
}
