// A real full disk for the file backend: a 2 MiB tmpfs mounted in a private mount namespace (root,
// or an unprivileged user namespace where the kernel allows one), so the kernel itself answers
// ENOSPC. Where no namespace can be had, it reports "skipped: ..." (exit 77, counted as skipped by
// ctest and named by tools/test); the quota hook's tests cover the same paths everywhere.
// Then a 12 MiB tmpfs and a whole replay: a pool too large for it is refused at start with the
// capacity that fits, leaving no directory behind, and a replay at that capacity, evicting all
// through, never meets ENOSPC (the backend runs every delete before the write that needs its
// room). About 5 s.

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "storage/file_backend.hpp"
#include "storage/payload_pattern.hpp"
#include "runtime/config/options.hpp"
#include "sim/driver/replay_driver.hpp"
#include "tests/storage/backend_calls.hpp"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {

constexpr int skipped = 77;

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

// In the child: a mount namespace of its own, with a tmpfs that no other process sees.
std::string private_tmpfs(const std::string& dir, const std::string& pool_dir) {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWNS) != 0) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
      return std::string("no mount namespace: ") + std::strerror(errno);
    write_file("/proc/self/setgroups", "deny");
    if (!write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
      return "cannot map ids in a user namespace";
  }
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("cannot make mounts private: ") + std::strerror(errno);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=2m") != 0 ||
      ::mount("tmpfs", pool_dir.c_str(), "tmpfs", 0, "size=12m") != 0)
    return std::string("cannot mount a tmpfs: ") + std::strerror(errno);
  return {};
}

int fail(const std::string& what) {
  std::cerr << "FAILED: " << what << "\n";
  return 1;
}

int check(const std::string& dir) {
  backend_options o;
  o.kind = storage_backend_kind::file;
  o.ns = {"m", "bf16"};
  o.nodes = 1;
  o.file_dirs = {dir + "/node0"};
  file_backend b(o);
  // Eight blocks of 512 KiB (+ 4 KiB header each) into 2 MiB: three fit.
  std::vector<block_ref> blocks;
  std::vector<block_bytes_t> payloads;
  for (uint64_t i = 0; i < 8; ++i) {
    blocks.push_back({i, 0x900 + i});
    payloads.push_back(pattern_payload(0x900 + i, 512 << 10));
  }
  std::vector<bool> stored = test::put_now(b, blocks, payloads);
  size_t n = static_cast<size_t>(std::count(stored.begin(), stored.end(), true));
  std::cout << "tmpfs of 2 MiB: " << n << " of 8 blocks stored, " << b.counters().puts_failed
            << " writes failed with ENOSPC\n";
  if (n == 0 || n == 8)
    return fail("expected the disk to fill part way, stored " + std::to_string(n));
  if (b.counters().puts_failed != 8 - n)
    return fail("failed writes not counted");
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      return fail("a temporary file was left behind: " + e.path().string());
  if (test::exists_now(b, blocks) != stored)
    return fail("exists does not match what was stored");
  auto got = test::get_now(b, blocks, 512 << 10);
  for (size_t i = 0; i < blocks.size(); ++i)
    if (stored[i] && (!got[i] || !check_pattern_payload(blocks[i].hash, 512 << 10, *got[i]).empty()))
      return fail("a stored block did not read back whole");
  // Evicting one makes room for one that failed.
  size_t kept = 0, lost = 0;
  while (!stored[kept])
    ++kept;
  while (stored[lost])
    ++lost;
  test::remove_now(b, {blocks[kept]});
  if (test::put_now(b, {blocks[lost]}, {payloads[lost]}) != std::vector<bool>{true})
    return fail("space freed by a removal could not be used");
  return 0;
}

// 120 distinct prompts of two trace blocks (16 cache blocks of 64 KiB), 15 ms apart: far more
// than the pool holds, so it evicts (and deletes) while it writes, all through the run.
replay_job pool_job(const std::string& dir, const std::string& pool, uint64_t capacity) {
  std::string trace = dir + "/trace.jsonl";
  std::ofstream out(trace);
  for (int k = 0; k < 120; ++k)
    out << "{\"timestamp\": " << k * 15 << ", \"input_length\": 1024, \"output_length\": 2, "
        << "\"hash_ids\": [" << 2 * k << ", " << 2 * k + 1 << "]}\n";
  out.close();
  replay_job job;
  job.traces = {trace};
  job.clock = clock_mode::wall;
  job.speed = 4;
  for (const std::string& s :
       {std::string("cache.device_tokens=4096"), std::string("cache.host_tokens=4096"),
        std::string("storage.payload_bytes=65536"), std::string("storage.backend=file"),
        "storage.file_dirs=[\"" + pool + "/kv/node0\"]",
        "storage.capacity_blocks=" + std::to_string(capacity)})
    job.cfg.set(s);
  return job;
}

int check_suggestion(const std::string& dir, const std::string& pool) {
  uint64_t fits = 0;
  try {
    run_replay_job(pool_job(dir, pool, 100000));
    return fail("a pool of 100000 blocks of 64 KiB was not refused on a 12 MiB tmpfs");
  } catch (const config_error& e) {
    std::string what = e.what();
    size_t at = what.find("storage.capacity_blocks=");
    if (at == std::string::npos)
      return fail("the refusal suggests no capacity: " + what);
    fits = std::stoull(what.substr(at + 24));
  }
  if (fs::exists(pool + "/kv"))
    return fail("the refused run left " + pool + "/kv behind");
  if (fits < 100 || fits > 190)
    return fail("a suggestion of " + std::to_string(fits) + " blocks for 12 MiB of 68 KiB files");
  replay_result r = run_replay_job(pool_job(dir, pool, fits));
  const auto& st = r.summary["storage"];
  uint64_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(pool))
    files += e.path().extension() == ".blk";
  std::cout << "12 MiB tmpfs: suggested " << fits << " blocks; at that capacity " << st["puts"]
            << " puts, " << r.summary["evictions"]["storage"] << " evictions, "
            << st["puts_dropped"] << " dropped (" << st["put_error"] << "), " << files
            << " files at the end\n";
  if (r.summary["evictions"]["storage"].get<uint64_t>() < fits)
    return fail("the replay did not evict enough to test the room deletes need");
  if (st["puts_dropped"] != 0 || !st["put_error"].get<std::string>().empty())
    return fail("the suggested capacity still met a full disk: " + st.dump());
  if (files > fits || files != st["stored_blocks"].get<uint64_t>())
    return fail("files and index differ: " + std::to_string(files) + " files, " +
                st["stored_blocks"].dump() + " indexed");
  return 0;
}

}  // namespace

int main() {
  std::string t = (fs::temp_directory_path() / "kvtier-tmpfs-XXXXXX").string();
  std::string dir = ::mkdtemp(t.data());
  std::string pool = dir + "-pool";
  fs::create_directories(pool);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string why = private_tmpfs(dir, pool);
    if (!why.empty()) {
      std::cout << "skipped: real full-disk test: " << why
                << " (the quota hook's tests cover the same paths)\n";
      std::fflush(stdout);
      ::_exit(skipped);
    }
    int rc = check(dir);
    if (rc == 0)
      rc = check_suggestion(dir, pool);
    std::fflush(stdout);
    ::_exit(rc);  // the namespace, and the tmpfs with it, go with this process
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  fs::remove_all(dir);
  fs::remove_all(pool);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
