#include "app/bench/bench_storage_runs.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "model/storage/storage_index.hpp"
#include "sim/trace/trace_ids.hpp"
#include "storage/payload_pattern.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr uint64_t small_bytes = 4096;

struct lone_fit {
  double latency_us = 0;
  double stream_gbps = 0;
};

// The line through (small_bytes, small_us) and (bytes, one_ms). Where the whole block took no
// longer than the small one (noise: the bytes cost too little to see), the block's bytes move at
// the node's batch rate `node_gbps` (a cap that does not bind a lone block) after the small
// request's latency.
lone_fit fit_lone(uint64_t bytes, double small_us, double one_ms, double node_gbps) {
  lone_fit f;
  double extra_s = one_ms / 1e3 - small_us / 1e6;
  if (bytes <= small_bytes || extra_s <= 0) {
    f.stream_gbps = node_gbps;
    f.latency_us = small_us;
    return f;
  }
  f.stream_gbps = double(bytes - small_bytes) / extra_s / 1e9;
  // small_bytes at that rate is well under a microsecond; the latency stays positive.
  f.latency_us = std::max(small_us - double(small_bytes) / f.stream_gbps / 1e3, small_us / 2);
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class Call>
void wait_for(Call call) {
  std::promise<void> done;
  auto f = done.get_future();
  call([&] { done.set_value(); });
  f.get();
}

// Seconds from the call to the instant the backend answered, stamped on the backend's thread
// (where the storage actor's real service time ends too), not when this thread woke to see it.
template <class Call>
double timed_call_s(Call call) {
  std::promise<clock_type::time_point> answered;
  auto f = answered.get_future();
  auto t0 = clock_type::now();
  call([&] { answered.set_value(clock_type::now()); });
  return std::chrono::duration<double>(f.get() - t0).count();
}

void idle(double gap_ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
}

// A block hash for the bench's i-th block of a series.
uint64_t bench_hash(uint64_t series, uint64_t i, bench_hashes hashes) {
  uint64_t h = series + i;
  return hashes == bench_hashes::spread ? splitmix64(h) : h;
}

using batch_refs = std::vector<std::vector<block_ref>>;

batch_refs make_batch_refs(uint32_t batch, uint32_t batches, bench_hashes hashes) {
  batch_refs refs(batches);
  for (uint32_t i = 0; i < batches; ++i)
    for (uint32_t j = 0; j < batch; ++j) {
      uint64_t hash = bench_hash(0xb0000000ull, i * batch + j, hashes);
      refs[i].push_back({make_storage_key(7, hash), hash});
    }
  return refs;
}

// Each batch's time, and their sum.
struct batch_times {
  double total_s = 0;
  std::vector<double> ms;

  void add(double s) {
    total_s += s;
    ms.push_back(s * 1e3);
  }
};

batch_times put_batches(storage_backend& b, const batch_refs& refs, uint64_t bytes, double gap_ms,
                        std::string& error) {
  batch_times t;
  for (const auto& batch : refs) {
    std::vector<block_bytes_t> payloads;
    for (const auto& r : batch)
      payloads.push_back(pattern_payload(r.hash, bytes));  // made before the clock starts
    idle(gap_ms);
    uint32_t stored = 0;
    t.add(timed_call_s([&](auto done) {
      b.put(batch, std::move(payloads), [&, done](std::vector<bool> ok) {
        stored = static_cast<uint32_t>(std::count(ok.begin(), ok.end(), true));
        done();
      });
    }));
    if (stored != batch.size())
      error = "put stored " + std::to_string(stored) + " of " + std::to_string(batch.size()) +
              " blocks";
  }
  return t;
}

// Gets read into one batch's worth of buffers, reused batch after batch, as a transfer engine
// reads into its host blocks: allocated and touched before the clock starts.
struct landing_buffers {
  std::vector<block_bytes_t> into;
  std::vector<block_span> spans;

  landing_buffers(uint32_t batch, uint64_t bytes) : into(batch, block_bytes_t(bytes)) {
    for (auto& buffer : into)
      spans.push_back({buffer.data(), bytes});
  }
};

batch_times get_batches(storage_backend& b, const batch_refs& refs, uint64_t bytes,
                        landing_buffers& land, double gap_ms, std::string& error) {
  batch_times t;
  for (const auto& batch : refs) {
    std::vector<bool> found;
    idle(gap_ms);
    t.add(timed_call_s([&](auto done) {
      b.get(batch, land.spans, [&, done](std::vector<bool> got) {
        found = std::move(got);
        done();
      });
    }));
    for (size_t j = 0; j < found.size(); ++j) {  // checked after the clock stops
      std::string bad = found[j] ? check_pattern_payload(batch[j].hash, bytes, land.into[j])
                                 : "get missed a block it had stored";
      if (!bad.empty())
        error = bad;
    }
  }
  return t;
}

struct lone_request {
  std::vector<block_ref> ref;
  uint64_t bytes = 0;
};

// One lone put or get after the backend has been idle `gap_ms`; returns seconds.
double lone_put(storage_backend& b, const lone_request& r, double gap_ms) {
  block_bytes_t payload = pattern_payload(r.ref[0].hash, r.bytes);  // made before the idle gap
  idle(gap_ms);
  return timed_call_s(
    [&](auto done) { b.put(r.ref, {std::move(payload)}, [done](auto) { done(); }); });
}

double lone_get(storage_backend& b, const lone_request& r, block_span into, double gap_ms,
                std::string& error) {
  idle(gap_ms);
  std::vector<bool> found;
  double s = timed_call_s([&](auto done) {
    b.get(r.ref, {into}, [&, done](std::vector<bool> got) {
      found = std::move(got);
      done();
    });
  });
  std::string bad = found.size() == 1 && found[0]
                      ? check_pattern_payload(r.ref[0].hash, r.bytes, into.data, into.size)
                      : "get missed a lone block it had stored";
  if (!bad.empty())
    error = bad;
  return s;
}

// Lone blocks, a whole one and a 4 KiB one in turn (the two sizes share the host's state of the
// moment); each figure the median of its samples.
struct lone_series {
  std::vector<lone_request> one, small;
  std::vector<double> put_one_ms, get_one_ms, put_small_us, get_small_us;

  lone_series(int samples, uint64_t bytes, bench_hashes hashes) : one(samples), small(samples) {
    for (int i = 0; i < samples; ++i) {
      uint64_t h = bench_hash(0xd0000000ull, static_cast<uint64_t>(i), hashes);
      one[i] = {{{make_storage_key(7, h), h}}, bytes};
      h = bench_hash(0xc0000000ull, static_cast<uint64_t>(i), hashes);
      small[i] = {{{make_storage_key(7, h), h}}, small_bytes};
    }
  }

  void put(storage_backend& b, double gap_ms) {
    for (size_t i = 0; i < one.size(); ++i) {
      put_one_ms.push_back(lone_put(b, one[i], gap_ms) * 1e3);
      put_small_us.push_back(lone_put(b, small[i], gap_ms) * 1e6);
    }
  }

  void get(storage_backend& b, landing_buffers& land, double gap_ms, std::string& error) {
    size_t batch = land.into.size();
    for (size_t i = 0; i < one.size(); ++i) {
      get_one_ms.push_back(lone_get(b, one[i], land.spans[i % batch], gap_ms, error) * 1e3);
      get_small_us.push_back(lone_get(b, small[i], {land.into[i % batch].data(), small_bytes},
                                      gap_ms, error) * 1e6);
    }
  }

  void remove(storage_backend& b) {
    for (size_t i = 0; i < one.size(); ++i)
      for (const auto* r : {&one[i], &small[i]})
        wait_for([&](auto done) { b.remove(r->ref, [done](std::vector<bool>) { done(); }); });
  }
};

// The lone requests' figures and the line through them, and the node's bandwidth once each
// batch's op latency is taken out of its time.
void fit_lone_figures(storage_figures& f, const lone_series& lone, uint64_t bytes,
                      uint32_t batches, double total, double put_s, double get_s) {
  f.put_one_ms = median(lone.put_one_ms);
  f.get_one_ms = median(lone.get_one_ms);
  f.put_small_us = median(lone.put_small_us);
  f.get_small_us = median(lone.get_small_us);
  lone_fit w = fit_lone(bytes, f.put_small_us, f.put_one_ms, f.put_gbps);
  lone_fit r = fit_lone(bytes, f.get_small_us, f.get_one_ms, f.get_gbps);
  f.op_latency_us = w.latency_us;
  f.stream_put_gbps = w.stream_gbps;
  f.read_op_latency_us = r.latency_us;
  f.stream_get_gbps = r.stream_gbps;
  auto node_gbps = [&](double took_s, double latency_us) {
    double moving_s = took_s - batches * latency_us / 1e6;
    return moving_s > took_s / 4 ? total / moving_s / 1e9 : total / took_s / 1e9;
  };
  f.node_put_gbps = node_gbps(put_s, f.op_latency_us);
  f.node_get_gbps = node_gbps(get_s, f.read_op_latency_us);
}

}  // namespace

storage_figures run_backend(storage_backend& b, uint64_t bytes, uint32_t batch, uint32_t batches,
                            double gap_ms, bench_hashes hashes, lone_requests lone,
                            std::string& error) {
  batch_refs refs = make_batch_refs(batch, batches, hashes);
  batch_times put = put_batches(b, refs, bytes, gap_ms, error);
  // The lone blocks are put here and got after the batch gets, so that their bytes are no longer
  // in the CPU's caches when they are read, as a replay's blocks are not.
  lone_series lone_blocks(lone == lone_requests::timed ? lone_samples : 0, bytes, hashes);
  lone_blocks.put(b, gap_ms);
  landing_buffers land(batch, bytes);
  batch_times get = get_batches(b, refs, bytes, land, gap_ms, error);
  lone_blocks.get(b, land, gap_ms, error);
  lone_blocks.remove(b);
  storage_figures f;
  double total = double(bytes) * batch * batches;
  f.put_gbps = total / put.total_s / 1e9;
  f.get_gbps = total / get.total_s / 1e9;
  f.put_batch_ms = median(put.ms);
  f.get_batch_ms = median(get.ms);
  for (const auto& r : refs)
    wait_for([&](auto done) { b.remove(r, [done](std::vector<bool>) { done(); }); });
  if (lone == lone_requests::timed)
    fit_lone_figures(f, lone_blocks, bytes, batches, total, put.total_s, get.total_s);
  return f;
}

}  // namespace kvtier
