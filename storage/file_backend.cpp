#include "storage/file_backend.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>

#include <xxhash.h>

#include "core/check.hpp"

namespace kvtier {

namespace {

constexpr uint64_t header_bytes = 4096;  // one page: keeps O_DIRECT payload offsets aligned
constexpr char magic[8] = {'K', 'V', 'T', 'B', 'L', 'K', '0', '1'};

struct header {
  char magic[8];
  uint64_t length;
  uint64_t checksum;
};

uint64_t round_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

std::string safe_component(std::string s) {
  for (char& c : s)
    if (c == '/' || c == '\0')
      c = '_';
  return s.empty() || s == "." || s == ".." ? "_" + s : s;
}

// Makes `path` and the directories above it that are missing; those it made are appended to
// `made` (so that a backend that cannot start takes them away again).
void make_dirs(const std::string& path, std::vector<std::string>& made) {
  std::string partial;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos)
      slash = path.size();
    partial = path.substr(0, slash);
    if (!partial.empty()) {
      if (::mkdir(partial.c_str(), 0755) == 0)
        made.push_back(partial);
      else if (errno != EEXIST)
        throw std::invalid_argument("storage.file_dirs: cannot make directory " + partial +
                                    ": " + std::strerror(errno));
    }
    start = slash + 1;
  }
}

// Writes all of `iov` at offset 0 (short writes continue); false with errno set on failure.
bool write_all(int fd, iovec* iov, int count) {
  off_t offset = 0;
  while (count > 0) {
    ssize_t n = ::pwritev(fd, iov, count, offset);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    offset += n;
    while (count > 0 && static_cast<size_t>(n) >= iov->iov_len) {
      n -= static_cast<ssize_t>(iov->iov_len);
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + n;
      iov->iov_len -= static_cast<size_t>(n);
    }
  }
  return true;
}

bool read_all(int fd, void* buf, size_t len, off_t offset) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::pread(fd, p, len, offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    len -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

// Reads `len` bytes at `offset` into `dst` and their XXH3 checksum into `sum`, chunk by chunk: each
// chunk is checksummed right after it lands, while it is still in the CPU's cache, so the
// checksum costs no second pass over memory. Chunks are page multiples (O_DIRECT).
bool read_checksummed(int fd, uint8_t* dst, size_t len, off_t offset, uint64_t& sum) {
  constexpr size_t chunk = 512u << 10;
  XXH3_state_t* state = XXH3_createState();
  if (!state || XXH3_64bits_reset(state) != XXH_OK) {
    XXH3_freeState(state);
    return false;
  }
  bool ok = true;
  for (size_t done = 0; ok && done < len; done += chunk) {
    size_t n = std::min(chunk, len - done);
    ok = read_all(fd, dst + done, n, offset + static_cast<off_t>(done)) &&
         XXH3_64bits_update(state, dst + done, n) == XXH_OK;
  }
  sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return ok;
}

struct aligned_buffer {
  void* p = nullptr;
  explicit aligned_buffer(size_t n) {
    if (::posix_memalign(&p, 4096, n) != 0)
      p = nullptr;
  }
  ~aligned_buffer() { std::free(p); }
};

}  // namespace

struct file_backend::node_dir {
  std::string path;
  std::atomic<uint64_t> used{0};
};

// Deletes waiting to run. Whichever writer starts a write first runs every delete asked before
// it, and waits for those another writer is running: a write never takes space that an asked
// delete has not yet given back, so the files never hold more than the pool's capacity (which
// counts a block from its put's acceptance). A block's own write was asked before any delete of
// it, and a delete asked before its block is written again runs first: the order per block holds.
struct file_backend::removals {
  struct one {
    block_ref block;
    std::shared_ptr<std::vector<char>> gone;
    std::shared_ptr<std::atomic<size_t>> remaining;
    std::shared_ptr<remove_done> finish;
    size_t index = 0;
  };
  std::mutex mutex;
  std::condition_variable idle;
  std::deque<one> queue;
  size_t running = 0;
};

struct file_backend::atomic_counters {
  std::atomic<uint64_t> puts_ok{0}, puts_failed{0}, gets_hit{0}, gets_missed{0}, bytes_written{0},
    bytes_read{0}, removed{0}, batches{0}, corrupt{0};
  std::atomic<int64_t> busy_ns{0};
  mutable std::mutex error_mutex;
  std::string put_error;  // the first failed write's reason (under error_mutex)
};

file_backend::file_backend(const backend_options& o)
  : storage_backend(static_cast<uint32_t>(o.file_dirs.size())),
    options_(o),
    counters_(std::make_unique<atomic_counters>()),
    removals_(std::make_unique<removals>()) {
  if (o.file_dirs.empty())
    throw std::invalid_argument("storage.file_dirs: the file backend needs one directory per node");
  std::vector<std::string> made;
  try {
    open_dirs(made);
  } catch (...) {
    for (auto it = made.rbegin(); it != made.rend(); ++it)
      ::rmdir(it->c_str());  // only what this backend made, and only while still empty
    throw;
  }
  unsigned half = std::max(1u, o.file_threads / 2);
  for (unsigned i = 0; i < half; ++i)
    writers_.push_back(std::make_unique<io_pool>(1));
  readers_ = std::make_unique<io_pool>(half);
}

void file_backend::open_dirs(std::vector<std::string>& made) {
  const backend_options& o = options_;
  for (const std::string& d : o.file_dirs) {
    auto n = std::make_unique<node_dir>();
    n->path = d + "/kvtier/" + safe_component(o.ns.model) + "/" + safe_component(o.ns.dtype);
    make_dirs(n->path, made);
    // Leftovers of an earlier process: temporary files go, finished blocks count as used space.
    if (DIR* dir = ::opendir(n->path.c_str())) {
      while (dirent* e = ::readdir(dir)) {
        std::string f = e->d_name;
        std::string full = n->path + "/" + f;
        struct stat s {};
        if (f.find(".tmp.") != std::string::npos)
          ::unlink(full.c_str());
        else if (f.size() > 4 && f.compare(f.size() - 4, 4, ".blk") == 0 &&
                 ::stat(full.c_str(), &s) == 0)
          n->used += static_cast<uint64_t>(s.st_size);
      }
      ::closedir(dir);
    }
    if (o.file_direct) {
      std::string probe = n->path + "/.direct-probe";
      int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
      if (fd < 0)
        throw std::invalid_argument("storage.file_direct: " + n->path +
                                    " does not support O_DIRECT: " + std::strerror(errno));
      ::close(fd);
      ::unlink(probe.c_str());
    }
    dirs_.push_back(std::move(n));
  }
}

file_backend::~file_backend() {
  writers_.clear();
  readers_.reset();
}

std::string file_backend::path_of(const block_ref& b) const {
  char name[24];
  std::snprintf(name, sizeof(name), "%016llx.blk", static_cast<unsigned long long>(b.hash));
  return dirs_[node_of_key(b.key, nodes())]->path + "/" + name;
}

uint64_t file_backend::used_bytes(uint32_t node) const {
  return dirs_.at(node)->used.load();
}

bool file_backend::write_block(const block_ref& b, const block_bytes_t& payload) {
  run_removals();
  node_dir& dir = *dirs_[node_of_key(b.key, nodes())];
  std::string final_path = path_of(b);
  std::string temp = final_path + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(next_temp_.fetch_add(1));
  header h{};
  std::memcpy(h.magic, magic, sizeof(magic));
  h.length = payload.size();
  h.checksum = XXH3_64bits(payload.data(), payload.size());
  uint64_t file_bytes = header_bytes + (options_.file_direct ? round_up(payload.size(), 4096)
                                                              : payload.size());
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (options_.file_direct ? O_DIRECT : 0);
  int fd = ::open(temp.c_str(), flags, 0644);
  if (fd < 0)
    return false;
  bool ok;
  uint64_t quota = options_.file_quota_bytes;
  // The space is taken before the write (writers racing for the last of it see it gone) and given
  // back if the block does not land.
  uint64_t used_before = dir.used.fetch_add(file_bytes);
  if (quota > 0 && used_before + file_bytes > quota) {
    // The test hook's full disk: part of the block lands, then the write fails as ENOSPC would.
    std::vector<uint8_t> part(header_bytes, 0);
    ssize_t partial = ::pwrite(fd, part.data(), part.size(), 0);
    (void)partial;
    ok = false;
    errno = ENOSPC;
  } else if (options_.file_direct) {
    aligned_buffer buf(file_bytes);
    ok = buf.p != nullptr;
    if (ok) {
      std::memset(buf.p, 0, header_bytes);
      std::memcpy(buf.p, &h, sizeof(h));
      auto* body = static_cast<uint8_t*>(buf.p) + header_bytes;
      std::memcpy(body, payload.data(), payload.size());
      std::memset(body + payload.size(), 0, file_bytes - header_bytes - payload.size());
      iovec iov{buf.p, file_bytes};
      ok = write_all(fd, &iov, 1);
    }
  } else {
    static const std::vector<uint8_t> zeros(header_bytes, 0);
    std::vector<uint8_t> head(zeros);
    std::memcpy(head.data(), &h, sizeof(h));
    iovec iov[2] = {{head.data(), header_bytes},
                    {const_cast<uint8_t*>(payload.data()), payload.size()}};
    ok = write_all(fd, iov, 2);
  }
  ::close(fd);
  if (!ok) {
    ::unlink(temp.c_str());
    dir.used -= file_bytes;
    return false;
  }
  struct stat old {};
  uint64_t replaced = ::stat(final_path.c_str(), &old) == 0 ? static_cast<uint64_t>(old.st_size) : 0;
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    ::unlink(temp.c_str());
    dir.used -= file_bytes;
    return false;
  }
  dir.used -= replaced;
  return true;
}

bool file_backend::read_block(const block_ref& b, block_span into) {
  std::string path = path_of(b);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (options_.file_direct ? O_DIRECT : 0));
  if (fd < 0)
    return false;
  bool ok = false;
  struct stat s {};
  if (::fstat(fd, &s) == 0 && static_cast<uint64_t>(s.st_size) >= header_bytes) {
    uint64_t body = static_cast<uint64_t>(s.st_size) - header_bytes;
    header h{};
    bool head_read;
    if (options_.file_direct) {
      aligned_buffer head(header_bytes);
      head_read = head.p && read_all(fd, head.p, header_bytes, 0);
      if (head_read)
        std::memcpy(&h, head.p, sizeof(h));
    } else {
      head_read = read_all(fd, &h, sizeof(h), 0);
    }
    // O_DIRECT files are padded to whole pages; others hold exactly the payload.
    bool shaped = head_read && std::memcmp(h.magic, magic, sizeof(magic)) == 0 &&
                  (options_.file_direct ? h.length <= body && body == round_up(h.length, 4096)
                                        : h.length == body);
    if (shaped && h.length == into.size) {
      uint64_t sum = 0;
      bool aligned = reinterpret_cast<uintptr_t>(into.data) % 4096 == 0 && into.size % 4096 == 0;
      if (!options_.file_direct || aligned) {
        ok = read_checksummed(fd, into.data, into.size, header_bytes, sum);
      } else {
        aligned_buffer bounce(round_up(into.size, 4096));
        ok = bounce.p && read_checksummed(fd, static_cast<uint8_t*>(bounce.p),
                                          round_up(into.size, 4096), header_bytes, sum);
        if (ok) {
          std::memcpy(into.data, bounce.p, into.size);
          sum = XXH3_64bits(into.data, into.size);
        }
      }
      // A block cut short or damaged on disk is a miss, never data.
      ok = ok && sum == h.checksum;
    }
  }
  ::close(fd);
  if (!ok)
    ++counters_->corrupt;
  return ok;
}

namespace {

// One batch's results, filled by its jobs; the last job to finish answers.
template <class Result>
struct batch_state {
  std::vector<Result> results;
  std::atomic<size_t> remaining;
  int64_t started_ns;
  batch_state(size_t n) : results(n), remaining(n), started_ns(now_ns()) {}
};

}  // namespace

// Metadata operations (exists, remove, list) touch the disk too: they run on the pools as well,
// never on the caller's thread.
void file_backend::exists(std::vector<block_ref> blocks, exists_done done) {
  readers_->post([this, blocks = std::move(blocks), done = std::move(done)] {
    std::vector<bool> out(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i)
      out[i] = ::access(path_of(blocks[i]).c_str(), F_OK) == 0;
    ++counters_->batches;
    done(std::move(out));
  });
}

void file_backend::get(std::vector<block_ref> blocks, std::vector<block_span> into,
                       get_done done) {
  KVTIER_ASSERT(into.size() == blocks.size());
  if (blocks.empty())
    return done({});
  auto batch = std::make_shared<batch_state<char>>(blocks.size());
  auto finish = std::make_shared<get_done>(std::move(done));
  for (size_t i = 0; i < blocks.size(); ++i)
    readers_->post([this, batch, finish, i, b = blocks[i], span = into[i]] {
      bool found = read_block(b, span);
      if (found) {
        ++counters_->gets_hit;
        counters_->bytes_read += span.size;
      } else {
        ++counters_->gets_missed;
      }
      batch->results[i] = found;
      if (--batch->remaining == 0) {
        counters_->busy_ns += now_ns() - batch->started_ns;
        ++counters_->batches;
        (*finish)(std::vector<bool>(batch->results.begin(), batch->results.end()));
      }
    });
}

void file_backend::put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
                       put_done done) {
  if (blocks.empty())
    return done({});
  auto batch = std::make_shared<batch_state<char>>(blocks.size());
  auto finish = std::make_shared<put_done>(std::move(done));
  for (size_t i = 0; i < blocks.size(); ++i)
    writer_of(blocks[i]).post([this, batch, finish, i, b = blocks[i], p = std::move(payloads[i])] {
      bool ok = write_block(b, p);
      if (ok) {
        ++counters_->puts_ok;
        counters_->bytes_written += p.size();
      } else {
        int error = errno;
        ++counters_->puts_failed;
        std::lock_guard<std::mutex> guard(counters_->error_mutex);
        if (counters_->put_error.empty())
          counters_->put_error = options_.file_dirs[node_of_key(b.key, nodes())] + ": " +
                                 std::strerror(error);
      }
      batch->results[i] = ok;
      if (--batch->remaining == 0) {
        counters_->busy_ns += now_ns() - batch->started_ns;
        ++counters_->batches;
        (*finish)(std::vector<bool>(batch->results.begin(), batch->results.end()));
      }
    });
}

void file_backend::remove(std::vector<block_ref> blocks, remove_done done) {
  if (blocks.empty())
    return done({});
  auto gone = std::make_shared<std::vector<char>>(blocks.size(), 0);
  auto remaining = std::make_shared<std::atomic<size_t>>(blocks.size());
  auto finish = std::make_shared<remove_done>(std::move(done));
  {
    std::lock_guard<std::mutex> guard(removals_->mutex);
    for (size_t i = 0; i < blocks.size(); ++i)
      removals_->queue.push_back({blocks[i], gone, remaining, finish, i});
  }
  // Ahead of queued writes, so that the deletes run soon even if no write starts meanwhile.
  writer_of(blocks.front()).post_first([this] { run_removals(); });
}

void file_backend::remove_one(const block_ref& b, char& gone) {
  std::string path = path_of(b);
  struct stat s {};
  if (::stat(path.c_str(), &s) != 0) {
    gone = errno == ENOENT;
    return;
  }
  if (::unlink(path.c_str()) == 0) {
    dirs_[node_of_key(b.key, nodes())]->used -= static_cast<uint64_t>(s.st_size);
    ++counters_->removed;
    gone = 1;
  } else {
    gone = errno == ENOENT;
  }
}

void file_backend::run_removals() {
  removals& r = *removals_;
  std::unique_lock<std::mutex> lock(r.mutex);
  for (;;) {
    if (!r.queue.empty()) {
      removals::one job = std::move(r.queue.front());
      r.queue.pop_front();
      ++r.running;
      lock.unlock();
      remove_one(job.block, (*job.gone)[job.index]);
      if (--*job.remaining == 0)
        (*job.finish)(std::vector<bool>(job.gone->begin(), job.gone->end()));
      lock.lock();
      if (--r.running == 0 && r.queue.empty())
        r.idle.notify_all();
      continue;
    }
    if (r.running == 0)
      return;
    r.idle.wait(lock);  // another writer is deleting: its space is not back yet
  }
}

void file_backend::list(list_done done) {
  readers_->post([this, done = std::move(done)] { done(list_blocks()); });
}

// Block files only (<hash>.blk); a temporary file is a write in progress, never a block.
block_listing file_backend::list_blocks() const {
  block_listing listing;
  listing.listed.assign(dirs_.size(), 0);
  std::vector<uint64_t>& out = listing.blocks;
  for (size_t n = 0; n < dirs_.size(); ++n) {
    const auto& d = dirs_[n];
    DIR* dir = ::opendir(d->path.c_str());
    if (!dir)
      continue;
    listing.listed[n] = 1;
    while (dirent* e = ::readdir(dir)) {
      std::string f = e->d_name;
      if (f.size() != 20 || f.compare(16, 4, ".blk") != 0)
        continue;
      std::string hex = f.substr(0, 16);  // kept alive: `end` points into it
      char* end = nullptr;
      uint64_t h = std::strtoull(hex.c_str(), &end, 16);
      if (end && *end == '\0')
        out.push_back(h);
    }
    ::closedir(dir);
  }
  return listing;
}

backend_counters file_backend::counters() const {
  backend_counters c;
  c.puts_ok = counters_->puts_ok;
  c.puts_failed = counters_->puts_failed;
  {
    std::lock_guard<std::mutex> guard(counters_->error_mutex);
    c.put_error = counters_->put_error;
  }
  c.gets_hit = counters_->gets_hit;
  c.gets_missed = counters_->gets_missed;
  c.bytes_written = counters_->bytes_written;
  c.bytes_read = counters_->bytes_read;
  c.removed = counters_->removed;
  c.busy_ns = counters_->busy_ns;
  c.batches = counters_->batches;
  c.corrupt = counters_->corrupt;
  return c;
}

}  // namespace kvtier
