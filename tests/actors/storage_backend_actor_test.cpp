#include <filesystem>

#include <catch2/catch.hpp>

#include "storage/payload_pattern.hpp"
#include "actors/storage/storage.hpp"
#include "model/storage/storage_index.hpp"
#include "runtime/config/deployment_plan.hpp"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t name_space = 42;

struct pool {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  storage_actor storage;

  pool(const backend_options& b, uint64_t capacity) {
    add_kvtier_types(cfg);
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    storage_options o;
    o.capacity_blocks = capacity;
    o.nodes = b.nodes;
    o.clock = sim_clock(sys->clock().now(), 1.0);
    o.backend = make_storage_backend(b);
    o.name_space = name_space;
    storage = spawn_storage(*sys, o);
  }
  ~pool() {
    caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
    self.reset();
  }

  template <class Reply, class... Ts>
  Reply ask(Ts&&... xs) {
    Reply out{};
    (*self)
      ->request(storage, std::chrono::seconds(10), std::forward<Ts>(xs)...)
      .receive([&](Reply& r) { out = std::move(r); },
               [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  }
};

storage_io blocks_io(const std::vector<uint64_t>& hashes, bool with_bytes) {
  storage_io io;
  io.bytes_each = 4096;
  for (uint64_t h : hashes) {
    io.keys.push_back(make_storage_key(name_space, h));
    io.hashes.push_back(h);
    if (with_bytes)
      io.payloads.push_back(pattern_payload(h, 4096));
  }
  return io;
}

// A get of `hashes` whose bytes go into `buffers` (one of 4096 bytes per block, made here).
storage_io get_into(const std::vector<uint64_t>& hashes, std::vector<block_bytes_t>& buffers) {
  storage_io io = blocks_io(hashes, false);
  buffers.assign(hashes.size(), block_bytes_t(4096));
  for (auto& b : buffers)
    io.into.push_back({reinterpret_cast<uint64_t>(b.data()), b.size()});
  return io;
}

}  // namespace

TEST_CASE("storage actor over files: bytes in, bytes out, evicted files deleted, index rebuilt "
          "after a restart", "[storage][actors]") {
  std::string t = (fs::temp_directory_path() / "kvtier-pool-XXXXXX").string();
  fs::path dir = ::mkdtemp(t.data());
  backend_options b;
  b.kind = storage_backend_kind::file;
  b.ns = {"m", "bf16"};
  b.nodes = 1;
  b.file_dirs = {(dir / "node0").string()};
  {
    // Room for three: the fourth put evicts the first. (A block counts from its put's acceptance,
    // so the fourth goes in a put of its own: in one put with the other three it would find the
    // node all being written, and be refused.)
    pool p(b, 3);
    auto put = p.ask<storage_io_reply>(caf::put_atom_v, blocks_io({11, 12, 13}, true));
    CHECK(put.done == 3);
    put = p.ask<storage_io_reply>(caf::put_atom_v, blocks_io({14}, true));
    CHECK(put.done == 1);
    std::vector<block_bytes_t> buffers;
    auto get = p.ask<storage_io_reply>(caf::get_atom_v, get_into({12, 13, 14}, buffers));
    REQUIRE(get.done == 3);
    CHECK(get.found == std::vector<uint8_t>{1, 1, 1});
    CHECK(check_pattern_payload(13, 4096, buffers[1]) == "");  // read into the asker's memory
    caf::anon_send(p.storage, storage_release{get.lease});
    auto ex = p.ask<exists_reply>(exists_query{blocks_io({12, 13, 11}, false).keys});
    CHECK(ex.leading == 2);
    auto rep = p.ask<storage_report>(report_atom_v);
    CHECK(rep.backend == "file");
    CHECK(rep.evictions == 1);
    CHECK(rep.removed == 1);
    CHECK(rep.open_leases == 0);
    CHECK(rep.pending == 0);
  }
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    files += e.is_regular_file();
  CHECK(files == 3);
  {
    pool again(b, 3);
    CHECK(again.ask<exists_reply>(exists_query{blocks_io({12}, false).keys}).leading == 0);
    CHECK(again.ask<uint64_t>(rebuild_atom_v) == 3);
    CHECK(again.ask<exists_reply>(exists_query{blocks_io({12, 13, 14}, false).keys}).leading == 3);
    std::vector<block_bytes_t> buffers;
    auto get = again.ask<storage_io_reply>(caf::get_atom_v, get_into({14, 11}, buffers));
    REQUIRE(get.done == 1);
    CHECK(get.found == std::vector<uint8_t>{1, 0});  // 11 was evicted before the restart
    CHECK(check_pattern_payload(14, 4096, buffers[0]) == "");
    caf::anon_send(again.storage, storage_release{get.lease});
  }
  fs::remove_all(dir);
}

TEST_CASE("storage backend config: errors name the key and what is expected", "[storage][config]") {
  auto resolve_with = [](std::vector<std::string> sets) {
    config c;
    for (const auto& s : sets)
      c.set(s);
    return resolve_plan(c, {});
  };
  CHECK_THROWS_WITH(resolve_with({"storage.backend=redis"}),
                    Catch::Contains("storage.redis") && Catch::Contains("none given"));
  CHECK_THROWS_WITH(resolve_with({"storage.backend=file", "storage.nodes=2",
                                  "storage.file_dirs=[\"a\"]"}),
                    Catch::Contains("1 given, storage.nodes is 2"));
  CHECK_THROWS_WITH(resolve_with({"storage.backend=redis", "storage.redis=[\"nohost\"]"}),
                    Catch::Contains("'nohost': expected host:port"));
  CHECK_THROWS_AS(resolve_with({"storage.redis=5"}), config_error);
  deployment_plan t = resolve_with({"storage.backend=file", "storage.file_dirs=[\"d\"]"});
  CHECK(t.storage.backend.kind == storage_backend_kind::file);
  CHECK(t.storage.payload_bytes == 64u * 128 * 1024);  // the default model's block
  CHECK(resolve_with({}).storage.payload_bytes == 0);  // model: no bytes
}
