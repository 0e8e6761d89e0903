#include "gpu/shm/shm_kv_cache.hpp"
#include "gpu/shm/shm_kv_cache_impl.hpp"
#include "gpu/shm/shm_segment.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/check.hpp"
#include "gpu/memory_fit.hpp"

namespace kvtier::gpu {

namespace {

std::string gib_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

shm_kv_cache::shm_kv_cache(const kv_cache_config& config)
    : config_(config),
      layout_{config.shape, config.block_size, config.device_blocks, config.host_blocks,
              config.strides} {
  startup_progress progress(config.progress);
  info_.available = true;
  info_.name = "CPU (engine KV in shared memory)";
  progress.begin(startup_phase::device_memory,
                 "mapping the engine's " + std::to_string(layout_.shape.layers)
                   + " layers of KV tensors from shared memory");
  map_layers(config);
  progress.end();
  memory_ask ask;
  ask.host_bytes = layout_.host_bytes();
  memory_free free;
  free.device_bytes = UINT64_MAX;
  free.host_bytes = host_available_bytes();
  if (auto why = memory_refusal(ask, free))
    throw gpu_error(*why);
  if (auto warn = memory_warning(ask, free))
    progress.say("warning: " + *warn);
  unsigned threads = touch_threads();
  progress.begin(startup_phase::host_pinning,
                 "mapping " + gib_text(layout_.host_bytes()) + " of host KV blocks (cache.host_tokens, "
                   + std::to_string(threads) + " threads)");
  if (layout_.host_bytes() > 0) {
    try {
      host_ = map_touched_pages(layout_.host_bytes(), threads);
    } catch (const std::exception& e) {
      throw gpu_error("mapping " + gib_text(layout_.host_bytes()) + " of host KV blocks: " + e.what()
                      + "; to fit, lower cache.host_tokens");
    }
  }
  progress.end();
  records_.assign(config.signal_words, 0);
  h2d_.thread = std::thread([this] { run(h2d_); });
  d2h_.thread = std::thread([this] { run(d2h_); });
  startup_ = progress.finish();
}

shm_kv_cache::~shm_kv_cache() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  h2d_.wake.notify_all();
  d2h_.wake.notify_all();
  h2d_.thread.join();
  d2h_.thread.join();
  if (host_ != nullptr)
    unmap_pages(host_, layout_.host_bytes());
}

void shm_kv_cache::map_layers(const kv_cache_config& config) {
  std::map<std::string, mapped_segment*> opened;
  uint64_t span = layout_.layer_span();
  for (size_t l = 0; l < config.attach.size(); ++l) {
    const layer_tensor_handle& h = config.attach[l];
    auto it = opened.find(h.segment);
    if (it == opened.end()) {
      segments_.push_back(std::make_unique<mapped_segment>(h.segment));
      it = opened.emplace(h.segment, segments_.back().get()).first;
    }
    const mapped_segment& s = *it->second;
    if (h.offset % 16 != 0)
      throw gpu_error("layer " + std::to_string(l) + "'s offset " + std::to_string(h.offset)
                      + " in '" + s.name() + "' is not a multiple of 16 bytes");
    if (h.offset + span > s.bytes())
      throw gpu_error("layer " + std::to_string(l) + " spans bytes [" + std::to_string(h.offset)
                      + ", " + std::to_string(h.offset + span) + ") of '" + s.name()
                      + "', which holds " + std::to_string(s.bytes()) + " bytes ("
                      + describe(layout_.shape, layout_.block_size) + ", "
                      + std::to_string(layout_.device_blocks) + " blocks)");
    layers_.push_back(s.base() + h.offset);
  }
  signals_ = std::make_unique<mapped_segment>(config.signals);
  uint64_t need = shm_signal_bytes(config.signal_words);
  if (signals_->bytes() < need)
    throw gpu_error("the signal segment '" + config.signals + "' holds "
                    + std::to_string(signals_->bytes()) + " bytes; "
                    + std::to_string(config.signal_words) + " signal words need "
                    + std::to_string(need));
}

op_id shm_kv_cache::submit(op_kind kind, const std::vector<block_pair>& pairs,
                           transfer_direction d) {
  if (auto err = check_pairs(pairs, d, layout_.device_blocks, layout_.host_blocks))
    throw gpu_error(std::string(to_string(d)) + " transfer rejected: " + *err);
  op_record rec;
  rec.kind = kind;
  rec.pairs = pairs;
  if (kind == op_kind::h2d)
    rec.signals.resize(layout_.shape.layers);
  return enqueue(std::move(rec));
}

op_id shm_kv_cache::enqueue(op_record rec) {
  std::lock_guard<std::mutex> guard(mutex_);
  op_id id = next_id_++;
  rec.queued = clock::now();
  lane& ln = rec.kind == op_kind::h2d ? h2d_ : d2h_;
  if (rec.kind == op_kind::d2h)
    rec.fence = fence_;
  ops_.emplace(id, std::move(rec));
  ln.queue.push_back(id);
  ln.wake.notify_one();
  return id;
}

void shm_kv_cache::run(lane& ln) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ln.wake.wait(lock, [&] { return stopping_ || !ln.queue.empty(); });
    if (ln.queue.empty())
      return;  // stopping, and nothing left
    op_id id = ln.queue.front();
    op_record& rec = ops_.at(id);  // stays put: only release() erases, after it is done
    lock.unlock();
    execute(id, rec);
    lock.lock();
    ln.queue.pop_front();
  }
}

void shm_kv_cache::execute(op_id id, op_record& rec) {
  rec.start = clock::now();
  switch (rec.kind) {
    case op_kind::h2d:
      copy_h2d(id, rec);
      break;
    case op_kind::d2h:
      copy_d2h(rec);
      break;
    case op_kind::fill:
    case op_kind::poison:
      patterns(rec);
      break;
  }
  bool notify = rec.notify && (rec.kind == op_kind::h2d || rec.kind == op_kind::d2h);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    rec.end = clock::now();
    rec.done = true;
    if (!rec.keep)
      ops_.erase(id);
  }
  done_.notify_all();
  if (notify && config_.on_complete)
    config_.on_complete(id, -1);
}

void shm_kv_cache::copy_h2d(op_id id, op_record& rec) {
  uint64_t bytes = layout_.chunk_bytes();
  for (uint32_t l = 0; l < layout_.shape.layers; ++l) {
    for (const block_pair& p : rec.pairs)
      for (uint32_t h = 0; h < layout_.halves(); ++h) {
        auto half = static_cast<kv_half>(h);
        std::memcpy(chunk(p.device, l, half), host_ + layout_.host_offset(p.host, l, half), bytes);
      }
    std::vector<std::pair<uint32_t, uint32_t>> signals;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      rec.layers_done = l + 1;
      rec.layer_end.push_back(clock::now());
      signals.swap(rec.signals[l]);
    }
    for (const auto& [word, record] : signals)
      store_and_wake(signal_word(word), record);
    done_.notify_all();
    if (config_.on_complete)
      config_.on_complete(id, static_cast<int>(l));
  }
}

void shm_kv_cache::copy_d2h(op_record& rec) {
  wait_for_forward(rec.fence);
  uint64_t bytes = layout_.chunk_bytes();
  for (const block_pair& p : rec.pairs)
    for (uint32_t l = 0; l < layout_.shape.layers; ++l)
      for (uint32_t h = 0; h < layout_.halves(); ++h) {
        auto half = static_cast<kv_half>(h);
        std::memcpy(host_ + layout_.host_offset(p.host, l, half), chunk(p.device, l, half), bytes);
      }
}

// The engine's forward word reaches the fence once its forward wrote the KV a read reads. It
// waits without a bound (an engine that is slow to finish a forward is still correct), but
// wakes every 50 ms to see whether the cache is going away.
void shm_kv_cache::wait_for_forward(uint32_t fence) {
  if (fence == 0)
    return;
  uint32_t* w = forward_word();
  for (;;) {
    uint32_t seen = load_word(w);
    if (counter_reached(seen, fence))
      return;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_)
        return;
    }
    wait_word(w, seen, 50'000'000L);
  }
}

void shm_kv_cache::patterns(op_record& rec) {
  uint64_t words = layout_.chunk_bytes() / 8;
  for (const block_pattern& b : rec.patterns)
    for (uint32_t l = 0; l < layout_.shape.layers; ++l)
      for (uint32_t h = 0; h < layout_.halves(); ++h) {
        auto half = static_cast<kv_half>(h);
        uint8_t* c = chunk(b.block, l, half);
        if (rec.kind == op_kind::poison) {
          std::memset(c, rec.poison, layout_.chunk_bytes());
          continue;
        }
        uint64_t seed = chunk_seed(b.hash, l, half);
        for (uint64_t w = 0; w < words; ++w) {
          uint64_t v = pattern_word(seed, w);
          std::memcpy(c + 8 * w, &v, 8);
        }
      }
}

shm_kv_cache::op_record& shm_kv_cache::find(op_id id) {
  auto it = ops_.find(id);
  if (it == ops_.end())
    throw gpu_error("op " + std::to_string(id) + " is unknown (released, or never submitted)");
  return it->second;
}

uint32_t shm_kv_cache::signal_ipc_event(op_id h2d, uint32_t layer, uint32_t event) {
  std::unique_lock<std::mutex> lock(mutex_);
  op_record& rec = find(h2d);
  if (rec.kind != op_kind::h2d)
    throw gpu_error("op " + std::to_string(h2d) + " is not an H2D op");
  if (event >= records_.size())
    throw gpu_error("signal word " + std::to_string(event) + " does not exist (there are "
                    + std::to_string(records_.size()) + ")");
  if (layer >= layout_.shape.layers)
    throw gpu_error("layer " + std::to_string(layer) + " is out of range");
  uint32_t record = ++records_[event];
  if (rec.layers_done > layer) {
    lock.unlock();
    store_and_wake(signal_word(event), record);  // the layer is in place already
    return record;
  }
  rec.signals[layer].push_back({event, record});
  return record;
}

void shm_kv_cache::fence_reads(uint32_t step) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (counter_reached(step, fence_))
    fence_ = step;
}

bool shm_kv_cache::layer_done(op_id id, int layer) {
  std::lock_guard<std::mutex> guard(mutex_);
  const op_record& rec = find(id);
  return layer < 0 ? rec.done : rec.done || rec.layers_done > static_cast<uint32_t>(layer);
}

void shm_kv_cache::wait(op_id id, int layer) {
  std::unique_lock<std::mutex> lock(mutex_);
  const op_record& rec = find(id);
  done_.wait(lock, [&] {
    return rec.done || (layer >= 0 && rec.layers_done > static_cast<uint32_t>(layer));
  });
}

transfer_timing shm_kv_cache::transfer_time(op_id id) {
  std::lock_guard<std::mutex> guard(mutex_);
  const op_record& rec = find(id);
  if (!rec.done)
    throw gpu_error("op " + std::to_string(id) + " has not completed");
  auto ns = [&](clock::time_point t) {
    return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t - rec.start).count());
  };
  transfer_timing t;
  t.bytes = rec.pairs.size() * layout_.host_block_bytes();
  t.total_ns = ns(rec.end);
  for (clock::time_point e : rec.layer_end)
    t.layer_done_ns.push_back(ns(e));
  return t;
}

double shm_kv_cache::start_offset_ns(op_id from, op_id to) {
  std::lock_guard<std::mutex> guard(mutex_);
  return static_cast<double>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(find(to).start - find(from).start)
      .count());
}

void shm_kv_cache::release(op_id id) {
  std::unique_lock<std::mutex> lock(mutex_);
  const op_record& rec = find(id);
  done_.wait(lock, [&] { return rec.done; });
  ops_.erase(id);
}

void shm_kv_cache::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] {
    for (const auto& [id, rec] : ops_)
      if (!rec.done)
        return false;
    return true;
  });
}

std::byte* shm_kv_cache::host_block(uint32_t block) {
  if (block >= layout_.host_blocks)
    throw gpu_error("host block " + std::to_string(block) + " is out of range [0, "
                    + std::to_string(layout_.host_blocks) + ")");
  return host_ + layout_.host_offset(block, 0, kv_half::key);
}

// fill and poison: ops of the d2h thread with no completion report.
void shm_kv_cache::fill_device_blocks(const std::vector<block_pattern>& blocks) {
  for (const block_pattern& b : blocks)
    if (b.block >= layout_.device_blocks)
      throw gpu_error("device block " + std::to_string(b.block) + " is out of range");
  op_record rec;
  rec.kind = op_kind::fill;
  rec.patterns = blocks;
  rec.notify = false;
  rec.keep = false;
  enqueue(std::move(rec));
}

void shm_kv_cache::poison_device_blocks(const std::vector<uint32_t>& blocks, uint8_t byte) {
  op_record rec;
  rec.kind = op_kind::poison;
  rec.poison = byte;
  rec.notify = false;
  for (uint32_t b : blocks) {
    if (b >= layout_.device_blocks)
      throw gpu_error("device block " + std::to_string(b) + " is out of range");
    rec.patterns.push_back({b, 0});
  }
  op_id id = enqueue(std::move(rec));
  wait(id, -1);
  release(id);
}

std::optional<verify_mismatch> shm_kv_cache::check_device_blocks(
    const std::vector<block_pattern>& blocks) {
  // After the fills and reads queued before it, as the CUDA backend checks on its stream.
  op_record marker;
  marker.kind = op_kind::fill;
  marker.notify = false;
  op_id id = enqueue(std::move(marker));
  wait(id, -1);
  release(id);
  uint64_t words = layout_.chunk_bytes() / 8;
  for (const block_pattern& b : blocks) {
    if (b.block >= layout_.device_blocks)
      throw gpu_error("device block " + std::to_string(b.block) + " is out of range");
    for (uint32_t l = 0; l < layout_.shape.layers; ++l)
      for (uint32_t h = 0; h < layout_.halves(); ++h) {
        auto half = static_cast<kv_half>(h);
        const uint8_t* c = chunk(b.block, l, half);
        uint64_t seed = chunk_seed(b.hash, l, half);
        for (uint64_t w = 0; w < words; ++w) {
          uint64_t found;
          std::memcpy(&found, c + 8 * w, 8);
          uint64_t expected = pattern_word(seed, w);
          if (found != expected)
            return verify_mismatch{true, b.block, l, half, 8 * w, b.hash, expected, found};
        }
      }
  }
  return std::nullopt;
}

std::unique_ptr<kv_cache> make_shm_kv_cache(const kv_cache_config& config) {
  const std::string what = "cannot attach the engine's shared-memory KV: ";
  if (auto err = check_config(config))
    throw gpu_error(what + *err);
  try {
    return std::make_unique<shm_kv_cache>(config);
  } catch (const gpu_error& e) {
    throw gpu_error(what + e.what());
  }
}

}  // namespace kvtier::gpu
