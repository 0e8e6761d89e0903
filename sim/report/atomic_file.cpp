#include "sim/report/atomic_file.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include <signal.h>
#include <unistd.h>

namespace kvtier {

namespace {

// The temporaries and new folders of this process, for a signal handler to remove: fixed
// storage and lock-free flags, since a handler may neither allocate nor lock.
enum slot_kind : int { free_slot = 0, file_slot = 1, folder_slot = 2 };
constexpr int slot_count = 32;
constexpr size_t slot_path_bytes = 4096;

struct cleanup_slot {
  std::atomic<int> kind{free_slot};
  char path[slot_path_bytes];
};

cleanup_slot slots[slot_count];
std::mutex slots_mutex;  // between registering threads; the handler only reads the flags

void remove_on_signal(int sig) {
  for (cleanup_slot& s : slots)
    if (s.kind.load() == file_slot)
      ::unlink(s.path);
  // Innermost folders first: rmdir refuses a folder that still holds one.
  for (int pass = 0; pass < 8; ++pass)
    for (cleanup_slot& s : slots)
      if (s.kind.load() == folder_slot)
        ::rmdir(s.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      // A handler someone else installed stays: it decides how the process ends.
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL)
        continue;
      struct sigaction sa {};
      sa.sa_handler = remove_on_signal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

int track(const std::string& path, slot_kind kind) {
  install_handlers();
  if (path.size() >= slot_path_bytes)
    return -1;
  std::lock_guard<std::mutex> lock(slots_mutex);
  for (int i = 0; i < slot_count; ++i) {
    if (slots[i].kind.load() != free_slot)
      continue;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].kind.store(kind);
    return i;
  }
  return -1;  // more than slot_count at once: that one is left to the next run's sweep
}

void untrack(int& slot) {
  if (slot >= 0)
    slots[slot].kind.store(free_slot);
  slot = -1;
}

// True if `text` is a process id whose process has ended.
bool dead_process(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  pid_t pid = static_cast<pid_t>(std::stol(text));
  return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

atomic_file::atomic_file(std::string path)
  : path_(std::move(path)),
    temp_(path_ + ".tmp." + std::to_string(::getpid())),
    out_(temp_, std::ios::binary | std::ios::trunc) {
  if (!out_)
    throw std::runtime_error(temp_ + ": cannot create: " + std::strerror(errno));
  slot_ = track(temp_, file_slot);
}

atomic_file::~atomic_file() {
  if (!committed_) {
    out_.close();
    std::remove(temp_.c_str());
  }
  untrack(slot_);
}

void atomic_file::finish() {
  if (finished_)
    return;
  out_.flush();
  bool ok = static_cast<bool>(out_);
  int error = errno;
  out_.close();
  ok = ok && static_cast<bool>(out_);
  finished_ = true;
  if (!ok)
    throw std::runtime_error(path_ + ": cannot write: " + std::strerror(error ? error : errno));
}

void atomic_file::commit() {
  commit_together({this});
}

void commit_together(const std::vector<atomic_file*>& files) {
  for (atomic_file* f : files)
    f->finish();
  // A hard link keeps each target's previous content until every rename has succeeded.
  std::vector<std::string> previous(files.size());  // empty: there was none (or no link)
  std::string suffix = ".old." + std::to_string(::getpid());
  for (size_t done = 0; done < files.size(); ++done) {
    atomic_file& f = *files[done];
    std::string backup = f.path_ + suffix;
    std::remove(backup.c_str());
    if (::link(f.path_.c_str(), backup.c_str()) == 0)
      previous[done] = backup;
    if (std::rename(f.temp_.c_str(), f.path_.c_str()) != 0) {
      int error = errno;
      if (!previous[done].empty())
        std::remove(previous[done].c_str());
      for (size_t i = done; i-- > 0;) {
        if (!previous[i].empty())
          std::rename(previous[i].c_str(), files[i]->path_.c_str());
        else
          std::remove(files[i]->path_.c_str());
      }
      throw std::runtime_error(f.path_ + ": cannot write: " + std::strerror(error) +
                               (done > 0 ? " (the outputs renamed before it were restored)" : ""));
    }
  }
  for (const std::string& backup : previous)
    if (!backup.empty())
      std::remove(backup.c_str());
  for (atomic_file* f : files) {
    f->committed_ = true;
    untrack(f->slot_);
  }
}

output_folder::output_folder(std::string dir, const std::vector<std::string>& names)
  : dir_(std::move(dir)) {
  namespace fs = std::filesystem;
  if (dir_.empty())
    throw std::runtime_error("the output folder needs a name");
  std::error_code ec;
  for (fs::path p = fs::path(dir_); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created_.insert(created_.begin(), p.string());
    if (p == p.parent_path())
      break;
  }
  make_directories(dir_);
  for (const std::string& folder : created_)
    slots_.push_back(track(folder, folder_slot));
  // Temporaries of runs that were killed (SIGKILL, power loss) before they could remove them.
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::string file = entry.path().filename().string();
    for (const std::string& name : names)
      for (const char* kind : {".tmp.", ".old."}) {
        std::string prefix = name + kind;
        if (file.compare(0, prefix.size(), prefix) == 0 && dead_process(file.substr(prefix.size())))
          fs::remove(entry.path(), ec);
      }
  }
}

output_folder::~output_folder() {
  for (int& slot : slots_)
    untrack(slot);
  if (kept_)
    return;
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    std::filesystem::remove(*it, ec);  // only if empty: remove() refuses a folder with files
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
}

std::string seconds_text(int64_t ns) {
  bool negative = ns < 0;
  uint64_t v = negative ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  uint64_t us = (v + 500) / 1000;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s%llu.%06llu", negative ? "-" : "",
                static_cast<unsigned long long>(us / 1000000),
                static_cast<unsigned long long>(us % 1000000));
  return buf;
}

}  // namespace kvtier
