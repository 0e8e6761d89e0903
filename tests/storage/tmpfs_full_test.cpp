// A real full disk for the file backend: a 2 MiB tmpfs mounted in a private mount namespace (root,
// or an unprivileged user namespace where the kernel allows one), so the kernel itself answers
// ENOSPC. Where no namespace can be had, it reports "skipped: ..." (exit 77, counted as skipped by
// ctest and named by tools/test); the quota hook's tests cover the same paths everywhere.

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
std::string private_tmpfs(const std::string& dir) {
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
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=2m") != 0)
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

}  // namespace

int main() {
  std::string t = (fs::temp_directory_path() / "kvtier-tmpfs-XXXXXX").string();
  std::string dir = ::mkdtemp(t.data());
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string why = private_tmpfs(dir);
    if (!why.empty()) {
      std::cout << "skipped: real full-disk test: " << why
                << " (the quota hook's tests cover the same paths)\n";
      std::fflush(stdout);
      ::_exit(skipped);
    }
    int rc = check(dir);
    std::fflush(stdout);
    ::_exit(rc);  // the namespace, and the tmpfs with it, go with this process
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  fs::remove_all(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
