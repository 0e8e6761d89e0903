// The shared-memory backend (gpu/shm/shm_kv_cache.hpp) against an engine's segments made here:
// swap-ins land layer by layer and store their signal words, reads wait for the engine's
// forward fence, any strides and MLA's latent are copied byte for byte, and segments that do
// not fit are refused by name. A few milliseconds.

#include "gpu/shm/shm_kv_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/verify_pattern.hpp"
#include "test_shapes.hpp"

using namespace kvtier;
using namespace kvtier::gpu;

// Its own namespace: the unity build compiles the GPU unit tests together.
namespace shm_kv_cache_test {

namespace {

/// A POSIX shared memory object the test (the engine) creates, maps and unlinks.
struct segment {
  std::string name;
  uint64_t bytes;
  std::byte* base = nullptr;

  segment(const std::string& tag, uint64_t n) : name("/kvtier-test-" + tag + "-" +
                                                     std::to_string(getpid())), bytes(n) {
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, static_cast<off_t>(n)) == 0);
    base = static_cast<std::byte*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    REQUIRE(base != MAP_FAILED);
  }
  ~segment() {
    munmap(base, bytes);
    shm_unlink(name.c_str());
  }
  uint32_t* word(uint64_t offset) { return reinterpret_cast<uint32_t*>(base + offset); }
};

constexpr uint32_t blocks = 12;
constexpr uint32_t slots = 2;

struct engine {
  kv_layout layout;
  segment tensors;
  segment signals;
  std::mutex mu;
  std::vector<std::pair<uint64_t, int>> completions;
  std::unique_ptr<kv_cache> cache;

  explicit engine(const kv_layout& l, const std::string& tag)
      : layout(l), tensors(tag + "-kv", l.shape.layers * l.layer_span()),
        signals(tag + "-sig", shm_signal_bytes(slots * l.shape.layers)) {
    kv_cache_config c;
    c.shape = l.shape;
    c.block_size = l.block_size;
    c.device_blocks = l.device_blocks;
    c.host_blocks = l.host_blocks;
    c.memory = device_memory::attached_shm;
    c.strides = l.strides;
    for (uint32_t i = 0; i < l.shape.layers; ++i)
      c.attach.push_back({{}, tensors.name, i * l.layer_span()});
    c.signals = signals.name;
    c.signal_words = slots * l.shape.layers;
    c.on_complete = [this](uint64_t op, int layer) {
      std::lock_guard<std::mutex> g(mu);
      completions.push_back({op, layer});
    };
    cache = make_kv_cache(c);
  }
  std::byte* chunk(uint32_t block, uint32_t layer, kv_half h) {
    return tensors.base + layer * layout.layer_span() + layout.layer_offset(block, h);
  }
  /// What the engine's block holds, gathered into host block layout.
  std::vector<std::byte> read(uint32_t block) {
    std::vector<std::byte> out(layout.host_block_bytes());
    for (uint32_t l = 0; l < layout.shape.layers; ++l)
      for (uint32_t h = 0; h < layout.halves(); ++h)
        std::memcpy(out.data() + uint64_t{l} * layout.slice_bytes() + h * layout.chunk_bytes(),
                    chunk(block, l, static_cast<kv_half>(h)), layout.chunk_bytes());
    return out;
  }
  uint32_t signal(uint32_t slot, uint32_t layer) {
    return __atomic_load_n(signals.word(shm_signals_offset + 4 * (slot * layout.shape.layers
                                                                  + layer)), __ATOMIC_ACQUIRE);
  }
};

kv_layout flash_infer() {
  kv_layout l = test::layout_of(3, 1, 8, 2, 2, blocks, blocks);  // 32-byte chunks
  l.strides = {l.chunk_bytes(), 2 * l.chunk_bytes()};
  return l;
}

kv_layout mla() {
  model_shape s = test::kv_of(4, 1, 0, 2);
  s.latent_dim = 24;
  return {s, 2, blocks, blocks};
}

void swap_in_and_back(const kv_layout& layout, const std::string& tag) {
  engine e(layout, tag);
  for (uint32_t h = 0; h < blocks; ++h)
    fill_host_block(e.cache->host_block(h), layout, 70 + h);
  std::vector<block_pair> in = {{5, 0}, {2, 1}, {11, 7}};
  op_id op = e.cache->submit_h2d(in);
  uint32_t record = 0;
  for (uint32_t l = 0; l < layout.shape.layers; ++l)
    record = e.cache->signal_ipc_event(op, l, 1 * layout.shape.layers + l);
  e.cache->wait(op, -1);
  CHECK(record == 1);
  for (uint32_t l = 0; l < layout.shape.layers; ++l) {
    CHECK(e.signal(1, l) == 1);
    CHECK(e.signal(0, l) == 0);
  }
  for (const block_pair& p : in)
    CHECK_FALSE(check_host_block(e.read(p.device).data(), layout, 70 + p.host, p.device));
  CHECK_FALSE(e.cache->check_device_blocks({{5, 70}, {2, 71}, {11, 77}}));
  transfer_timing t = e.cache->transfer_time(op);
  CHECK(t.layer_done_ns.size() == layout.shape.layers);
  CHECK(t.bytes == 3 * layout.host_block_bytes());
  // Back into other host blocks.
  op_id out = e.cache->submit_d2h({{5, 9}, {11, 10}});
  e.cache->wait(out, -1);
  CHECK_FALSE(check_host_block(e.cache->host_block(9), layout, 70, 9));
  CHECK_FALSE(check_host_block(e.cache->host_block(10), layout, 77, 10));
  e.cache->release(op);
  e.cache->release(out);
  // The read's end is posted by the copy thread, which may call back just after wait() returned:
  // give it up to two seconds.
  for (int i = 0; i < 2000; ++i) {
    {
      std::lock_guard<std::mutex> g(e.mu);
      if (e.completions.size() >= layout.shape.layers + 2)
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> g(e.mu);
  // One completion per layer of the swap-in, then its end; the read's end.
  CHECK(e.completions.size() == layout.shape.layers + 2);
  CHECK(e.completions.back() == std::make_pair(out, -1));
}

}  // namespace

TEST_CASE("shm backend: a swap-in lands layer by layer, strided and back", "[gpu][shm]") {
  swap_in_and_back(flash_infer(), "fi");
}

TEST_CASE("shm backend: MLA's latent, one chunk per layer and block", "[gpu][shm][mla]") {
  swap_in_and_back(mla(), "mla");
}

TEST_CASE("shm backend: a signal asked for after its layer landed is stored at once",
          "[gpu][shm]") {
  engine e(flash_infer(), "late");
  op_id op = e.cache->submit_h2d({{1, 1}});
  e.cache->wait(op, -1);
  CHECK(e.cache->signal_ipc_event(op, 2, 2) == 1);
  CHECK(e.signal(0, 2) == 1);
  CHECK(e.cache->signal_ipc_event(op, 2, 2) == 2);  // records count up
  CHECK(e.signal(0, 2) == 2);
}

TEST_CASE("shm backend: reads wait for the engine's forward fence", "[gpu][shm]") {
  engine e(flash_infer(), "fence");
  e.cache->fill_device_blocks({{4, 1234}});
  e.cache->fence_reads(5);
  op_id op = e.cache->submit_d2h({{4, 3}});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK_FALSE(e.cache->layer_done(op, -1));  // the forward of step 5 has not said so
  uint32_t* forward = e.signals.word(shm_forward_offset);
  __atomic_store_n(forward, 4u, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  CHECK_FALSE(e.cache->layer_done(op, -1));
  __atomic_store_n(forward, 5u, __ATOMIC_RELEASE);  // no wake: the wait's timeout sees it
  e.cache->wait(op, -1);
  CHECK_FALSE(check_host_block(e.cache->host_block(3), e.layout, 1234, 3));
  e.cache->release(op);
}

TEST_CASE("shm backend: segments that do not fit are refused by name", "[gpu][shm]") {
  kv_layout l = flash_infer();
  segment small("small", l.layer_span());  // one layer's worth for three layers
  segment sig("sig", shm_signal_bytes(slots * l.shape.layers));
  kv_cache_config c;
  c.shape = l.shape;
  c.block_size = l.block_size;
  c.device_blocks = blocks;
  c.host_blocks = blocks;
  c.memory = device_memory::attached_shm;
  c.strides = l.strides;
  for (uint32_t i = 0; i < l.shape.layers; ++i)
    c.attach.push_back({{}, small.name, i * l.layer_span()});
  c.signals = sig.name;
  c.signal_words = slots * l.shape.layers;
  CHECK_THROWS_WITH(make_kv_cache(c), Catch::Contains("layer 1 spans bytes"));
  c.attach.assign(l.shape.layers, {{}, "/kvtier-test-no-such-segment", 0});
  CHECK_THROWS_WITH(make_kv_cache(c), Catch::Contains("cannot open shared memory object"));
  c.attach.assign(l.shape.layers, {{}, "no-slash", 0});
  CHECK_THROWS_WITH(make_kv_cache(c), Catch::Contains("shm_open(3)"));
  c.attach.assign(l.shape.layers, {{}, small.name, 0});
  c.signal_words = 1000;
  CHECK_THROWS_WITH(make_kv_cache(c), Catch::Contains("signal words need"));
  c.signal_words = slots * l.shape.layers;
  c.strides = {l.chunk_bytes(), l.chunk_bytes()};
  CHECK_THROWS_WITH(make_kv_cache(c), Catch::Contains("overlap"));
}

}  // namespace shm_kv_cache_test
