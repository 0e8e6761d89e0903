#pragma once

// Blocking wrappers over a storage backend's completion callbacks, for tests.

#include <algorithm>
#include <future>

#include "storage/storage_backend.hpp"

namespace kvtier::test {

inline std::vector<bool> exists_now(storage_backend& b, std::vector<block_ref> blocks) {
  std::promise<std::vector<bool>> p;
  auto f = p.get_future();
  b.exists(std::move(blocks), [&](std::vector<bool> r) { p.set_value(std::move(r)); });
  return f.get();
}

/// Gets block i into a buffer of `sizes[i]` bytes: its bytes where found, nullopt where missed.
inline std::vector<std::optional<block_bytes_t>> get_now(storage_backend& b,
                                                         std::vector<block_ref> blocks,
                                                         const std::vector<uint64_t>& sizes) {
  std::vector<block_bytes_t> buffers;
  std::vector<block_span> into;
  for (uint64_t size : sizes)
    buffers.emplace_back(size);
  for (auto& buffer : buffers)
    into.push_back({buffer.data(), buffer.size()});
  std::promise<std::vector<bool>> p;
  auto f = p.get_future();
  b.get(std::move(blocks), std::move(into), [&](std::vector<bool> r) { p.set_value(std::move(r)); });
  std::vector<bool> found = f.get();
  std::vector<std::optional<block_bytes_t>> out(found.size());
  for (size_t i = 0; i < found.size(); ++i)
    if (found[i])
      out[i] = std::move(buffers[i]);
  return out;
}

/// The same with every block `size` bytes.
inline std::vector<std::optional<block_bytes_t>> get_now(storage_backend& b,
                                                         std::vector<block_ref> blocks,
                                                         uint64_t size) {
  std::vector<uint64_t> sizes(blocks.size(), size);
  return get_now(b, std::move(blocks), sizes);
}

inline std::vector<bool> put_now(storage_backend& b, std::vector<block_ref> blocks,
                                 std::vector<block_bytes_t> payloads) {
  std::promise<std::vector<bool>> p;
  auto f = p.get_future();
  b.put(std::move(blocks), std::move(payloads), [&](std::vector<bool> r) { p.set_value(std::move(r)); });
  return f.get();
}

/// Per block: whether it is gone (deleted or absent), or its delete could not run.
inline std::vector<bool> remove_now(storage_backend& b, std::vector<block_ref> blocks) {
  std::promise<std::vector<bool>> p;
  auto f = p.get_future();
  b.remove(std::move(blocks), [&](std::vector<bool> gone) { p.set_value(std::move(gone)); });
  return f.get();
}

/// The whole listing, its block lists sorted.
inline block_listing listing_now(storage_backend& b) {
  std::promise<block_listing> p;
  auto f = p.get_future();
  b.list([&](block_listing r) { p.set_value(std::move(r)); });
  auto out = f.get();
  std::sort(out.blocks.begin(), out.blocks.end());
  std::sort(out.partial.begin(), out.partial.end());
  return out;
}

/// The blocks a listing found whole, sorted.
inline std::vector<uint64_t> list_now(storage_backend& b) {
  return listing_now(b).blocks;
}

}  // namespace kvtier::test
