#include "app/bench/bench_storage_baselines.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstring>

#include "storage/payload_pattern.hpp"
#include "storage/redis_backend.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

}  // namespace

storage_figures baseline_memory(uint64_t bytes, uint32_t blocks, uint32_t batch) {
  storage_figures f;
  std::vector<block_bytes_t> src;
  for (uint32_t i = 0; i < blocks; ++i)
    src.emplace_back(bytes, static_cast<uint8_t>(i));
  std::vector<block_bytes_t> dst(batch, block_bytes_t(bytes));
  auto t0 = clock_type::now();
  for (uint32_t i = 0; i < blocks; ++i)
    std::memcpy(dst[i % batch].data(), src[i].data(), bytes);
  f.put_gbps = f.get_gbps = double(bytes) * blocks / seconds_since(t0) / 1e9;
  return f;
}

storage_figures baseline_redis(const std::string& address, uint64_t bytes, uint32_t blocks,
                               std::string& error) {
  storage_figures f;
  auto [host, port] = parse_redis_address(address);
  redisContext* c = redisConnect(host.c_str(), port);
  if (!c || c->err) {
    error = "baseline: cannot reach " + address;
    if (c)
      redisFree(c);
    return f;
  }
  block_bytes_t payload = pattern_payload(2, bytes);
  auto t0 = clock_type::now();
  for (uint32_t i = 0; i < blocks; ++i) {
    std::string key = "kvtier-bench-baseline:" + std::to_string(i);
    auto* r = static_cast<redisReply*>(redisCommand(c, "SET %b %b", key.data(), key.size(),
                                                    payload.data(), payload.size()));
    if (!r || r->type == REDIS_REPLY_ERROR)
      error = "baseline: SET failed";
    if (r)
      freeReplyObject(r);
  }
  f.put_gbps = double(bytes) * blocks / seconds_since(t0) / 1e9;
  t0 = clock_type::now();
  for (uint32_t i = 0; i < blocks; ++i) {
    std::string key = "kvtier-bench-baseline:" + std::to_string(i);
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size()));
    if (!r || r->type != REDIS_REPLY_STRING || r->len != bytes)
      error = "baseline: GET failed";
    if (r)
      freeReplyObject(r);
  }
  f.get_gbps = double(bytes) * blocks / seconds_since(t0) / 1e9;
  for (uint32_t i = 0; i < blocks; ++i) {
    std::string key = "kvtier-bench-baseline:" + std::to_string(i);
    freeReplyObject(redisCommand(c, "DEL %b", key.data(), key.size()));
  }
  redisFree(c);
  return f;
}

storage_figures baseline_file(const std::string& dir, uint64_t bytes, uint32_t blocks,
                              uint32_t batch, std::string& error) {
  storage_figures f;
  std::string path = dir + "/kvtier-bench-baseline.dat";
  block_bytes_t payload = pattern_payload(3, bytes);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "baseline: cannot write " + path;
    return f;
  }
  auto t0 = clock_type::now();
  for (uint32_t i = 0; i < blocks; ++i)
    if (::write(fd, payload.data(), bytes) != static_cast<ssize_t>(bytes))
      error = "baseline: short write to " + path;
  ::close(fd);
  f.put_gbps = double(bytes) * blocks / seconds_since(t0) / 1e9;
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<block_bytes_t> in(batch, block_bytes_t(bytes));
  t0 = clock_type::now();
  for (uint32_t i = 0; i < blocks; ++i)
    if (::read(fd, in[i % batch].data(), bytes) != static_cast<ssize_t>(bytes))
      error = "baseline: short read of " + path;
  ::close(fd);
  f.get_gbps = double(bytes) * blocks / seconds_since(t0) / 1e9;
  ::unlink(path.c_str());
  return f;
}

}  // namespace kvtier
