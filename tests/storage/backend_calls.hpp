#pragma once

// Blocking wrappers over a storage backend's completion callbacks, for tests.

#include <future>

#include "actors/storage/storage_backend.hpp"

namespace kvtier::test {

inline std::vector<bool> exists_now(storage_backend& b, std::vector<block_ref> blocks) {
  std::promise<std::vector<bool>> p;
  auto f = p.get_future();
  b.exists(std::move(blocks), [&](std::vector<bool> r) { p.set_value(std::move(r)); });
  return f.get();
}

inline std::vector<std::optional<block_bytes_t>> get_now(storage_backend& b,
                                                         std::vector<block_ref> blocks) {
  std::promise<std::vector<std::optional<block_bytes_t>>> p;
  auto f = p.get_future();
  b.get(std::move(blocks), [&](auto r) { p.set_value(std::move(r)); });
  return f.get();
}

inline std::vector<bool> put_now(storage_backend& b, std::vector<block_ref> blocks,
                                 std::vector<block_bytes_t> payloads) {
  std::promise<std::vector<bool>> p;
  auto f = p.get_future();
  b.put(std::move(blocks), std::move(payloads), [&](std::vector<bool> r) { p.set_value(std::move(r)); });
  return f.get();
}

inline void remove_now(storage_backend& b, std::vector<block_ref> blocks) {
  std::promise<void> p;
  auto f = p.get_future();
  b.remove(std::move(blocks), [&] { p.set_value(); });
  f.get();
}

inline std::vector<uint64_t> list_now(storage_backend& b) {
  std::promise<std::vector<uint64_t>> p;
  auto f = p.get_future();
  b.list([&](std::vector<uint64_t> r) { p.set_value(std::move(r)); });
  auto out = f.get();
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvtier::test
