#pragma once

// Block payloads in files: one directory per storage node, one file per block
// (<dir>/kvtier/<model>/<dtype>/<hash>.blk).
//
// One file per block, not a packed segment: the pool evicts single blocks in LRU order, and a
// block (64 tokens of an 8B model: 8 MiB) is large enough that a file's metadata costs nothing
// beside it; a segment would need its own free-space map and compaction to give evicted blocks'
// space back, which is the part of a log-structured store that goes wrong.
//
// A block is written to a temporary name in the same directory and renamed over its final name
// once every byte is written, so a reader never sees a torn block; its header records the payload
// length and an XXH3 checksum, checked on every read, so a file cut short by a crash (rename
// without fsync) reads as a miss, never as data. A read goes straight into the caller's span, in
// chunks that are checksummed while they are still in the CPU's cache: one pass over memory. Leftover temporary files are removed at start.
// Writes and reads run on small thread pools of their own (io_pool.hpp); with `file_direct` they bypass the
// page cache (O_DIRECT, 4 KiB-aligned buffers and sizes; a read lands in the caller's span
// directly when it is 4 KiB-aligned, through an aligned bounce buffer otherwise).
//
// Capacity is the pool's: the storage index evicts and the actor removes the victims' files. Every
// delete asked before a write starts has run by then (removals in file_backend.cpp), so the files
// hold at most the pool's capacity: a disk that fits the capacity never fills. A write that fails
// (ENOSPC: a full disk, or the test hook `file_quota_bytes`) removes its temporary file and
// reports the block not stored.

#include <atomic>
#include <memory>

#include "storage/io_pool.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

class file_backend final : public storage_backend {
 public:
  explicit file_backend(const backend_options& o);
  ~file_backend() override;

  std::string name() const override { return "file"; }
  bool asynchronous() const override { return true; }
  void exists(std::vector<block_ref> blocks, exists_done done) override;
  void get(std::vector<block_ref> blocks, std::vector<block_span> into, get_done done) override;
  void put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
           put_done done) override;
  void remove(std::vector<block_ref> blocks, remove_done done) override;
  void list(list_done done) override;
  backend_counters counters() const override;

  /// Bytes the node's block files hold now.
  uint64_t used_bytes(uint32_t node) const;

 private:
  struct node_dir;
  void open_dirs(std::vector<std::string>& made);
  std::string path_of(const block_ref& b) const;
  bool write_block(const block_ref& b, const block_bytes_t& payload);
  bool read_block(const block_ref& b, block_span into);
  block_listing list_blocks() const;
  void remove_one(const block_ref& b, char& gone);
  /// Runs every delete asked so far, and waits for those other threads are running.
  void run_removals();

  backend_options options_;
  std::vector<std::unique_ptr<node_dir>> dirs_;
  std::atomic<uint64_t> next_temp_{0};
  struct atomic_counters;
  std::unique_ptr<atomic_counters> counters_;
  struct removals;
  std::unique_ptr<removals> removals_;
  io_pool& writer_of(const block_ref& b) { return *writers_[b.hash % writers_.size()]; }

  // last: their threads stop before the state they use goes. Reads have threads of their own, so
  // a load never queues behind a burst of backups. Each writer is one thread, and a block's
  // writes and removals always go to the same one: they happen in the order they were asked
  // (a block evicted and stored again is never deleted after its new write).
  std::vector<std::unique_ptr<io_pool>> writers_;
  std::unique_ptr<io_pool> readers_;
};

}  // namespace kvtier
