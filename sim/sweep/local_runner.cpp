#include "sim/sweep/local_runner.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/report/atomic_file.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;

pid_t spawn_cell(const local_run_options& options, const std::string& dir, const std::string& id) {
  std::string log = cell_dir(dir, id) + "/log.txt";
  make_directories(cell_dir(dir, id));
  std::vector<std::string> args = {options.self, "sweep", "--out", dir, "--cell", id, "--quiet"};
  pid_t parent = ::getpid();
  pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // A worker dies with the sweep that started it, however the sweep ends (Ctrl-C, kill -9):
    // an orphan would go on writing into a folder whose runner has gone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(options.self.c_str(), argv.data());
    std::fprintf(stderr, "kvtier sweep: cannot run %s: %s\n", options.self.c_str(),
                 std::strerror(errno));
    ::_exit(1);
  }
  return pid;
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// How a worker that left no status of its own ended, for its row (docs/outputs.md).
std::string how_it_ended(const std::string& dir, const std::string& id, int status) {
  if (WIFSIGNALED(status))
    return "killed by " + signal_name(WTERMSIG(status));
  return "exit code " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " (see "
         + cell_dir(dir, id) + "/log.txt)";
}

std::string why_failed(const std::string& dir, const std::string& id, int status) {
  auto s = cell_status(dir, id);
  if (!s) {
    record_worker_end(dir, id, how_it_ended(dir, id, status));
    s = cell_status(dir, id);
  }
  if (s && s->contains("error"))
    return (*s)["error"].get<std::string>();
  return how_it_ended(dir, id, status);
}

// The signal that asked the runner to stop (SIGTERM, SIGINT), 0 until one did.
volatile std::sig_atomic_t stop_signal = 0;

void note_stop(int sig) { stop_signal = sig; }

// Catches SIGTERM and SIGINT while the runner works, so that it can say which cells they cut
// short; the earlier handlers come back when it is done.
class stop_signals {
 public:
  stop_signals() {
    stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = note_stop;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGINT, &sa, &old_int_);
  }
  ~stop_signals() {
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
  }
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

 private:
  struct sigaction old_term_ {}, old_int_ {};
};

struct running_cell {
  const sweep_cell* cell;
  clock_type::time_point started;
  bool timed_out = false;
};

std::string duration_text(double s) {
  char buf[32];
  if (s < 90)
    std::snprintf(buf, sizeof(buf), "%.0f s", s);
  else
    std::snprintf(buf, sizeof(buf), "%.1f min", s / 60);
  return buf;
}

}  // namespace

std::string self_executable() {
  // The link itself, not its target: a worker forked from this process then execs the very
  // binary the sweep started with, even if a rebuild replaced the file since.
  std::error_code ec;
  if (!std::filesystem::exists("/proc/self/exe", ec))
    throw std::runtime_error("cannot find this program (/proc/self/exe is missing)");
  return "/proc/self/exe";
}

namespace {

// Stopped by a signal: the workers go (they hold nothing a kill loses: a cell is done only once
// its cell.json says so), each cut-short cell gets a row saying why, and the runner ends by the
// same signal so that whoever stopped it sees it stopped.
[[noreturn]] void stop_now(const std::string& dir, const local_run_options& options,
                           std::map<pid_t, running_cell>& running,
                           const std::vector<const sweep_cell*>& unstarted) {
  int sig = stop_signal;
  for (auto& [pid, c] : running)
    ::kill(pid, SIGKILL);
  std::string who = options.stopped_as.empty() ? "the sweep" : options.stopped_as;
  std::string why = who + " was stopped by " + signal_name(sig)
                    + (options.stopped_as.empty() || sig != SIGTERM
                         ? std::string()
                         : std::string(" (scancel, or the task's time limit)"));
  for (auto& [pid, c] : running) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!cell_done(dir, c.cell->id))
      record_cell_failure(dir, c.cell->id, why + " while this cell ran", true);
  }
  if (!options.stopped_as.empty())
    for (const sweep_cell* c : unstarted)
      if (!cell_status(dir, c->id))
        record_cell_failure(dir, c->id, why + " before this cell started", true);
  if (options.progress)
    std::cerr << "sweep: " << why << "; " << running.size() << " running cells stopped\n";
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  ::_exit(128 + sig);
}

// Kills the workers past the per-cell time limit (their rows say so once they are reaped).
void kill_over_time(std::map<pid_t, running_cell>& running, double limit_s) {
  if (limit_s <= 0)
    return;
  for (auto& [pid, c] : running)
    if (!c.timed_out
        && std::chrono::duration<double>(clock_type::now() - c.started).count() > limit_s) {
      c.timed_out = true;
      ::kill(pid, SIGKILL);
    }
}

// A worker that ended: whether its cell is done, and if not, its row says why.
bool reaped_ok(const std::string& dir, const local_run_options& options, const running_cell& c,
               int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && cell_done(dir, c.cell->id))
    return true;
  if (c.timed_out && !cell_status(dir, c.cell->id)) {
    char limit[64];
    std::snprintf(limit, sizeof(limit), "%g", options.cell_time_limit_s);
    record_cell_failure(dir, c.cell->id,
                        std::string("killed after the per-cell time limit of ") + limit
                          + " s (--cell-time-limit)");
  }
  std::cerr << "sweep: cell " << c.cell->id << " failed: " << why_failed(dir, c.cell->id, status)
            << '\n';
  return false;
}

}  // namespace

local_run_result run_local(const std::string& dir, const sweep_plan& plan,
                           const local_run_options& options) {
  auto start = clock_type::now();
  local_run_result r;
  std::vector<const sweep_cell*> todo;
  for (const auto& c : plan.cells) {
    if (cell_done(dir, c.id))
      ++r.skipped;
    else
      todo.push_back(&c);
  }
  size_t total = plan.cells.size();
  if (options.progress && r.skipped > 0)
    std::cerr << "sweep: " << r.skipped << " of " << total << " cells already done\n";
  stop_signals stops;
  std::map<pid_t, running_cell> running;
  size_t next = 0;
  size_t jobs = options.jobs == 0 ? 1 : options.jobs;
  auto report = [&] {
    if (!options.progress)
      return;
    double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
    size_t done = r.skipped + r.ran;
    size_t left = total - done;
    std::cerr << "sweep: " << done << "/" << total << " done, " << running.size() << " running, "
              << r.failed << " failed";
    if (r.ran > 0 && left > 0)
      std::cerr << ", ~" << duration_text(elapsed / r.ran * left) << " left";
    std::cerr << '\n';
  };
  bool finished_one = false;  // report once the freed worker slot is filled again
  while (next < todo.size() || !running.empty()) {
    if (stop_signal != 0)
      stop_now(dir, options, running, {todo.begin() + static_cast<long>(next), todo.end()});
    while (next < todo.size() && running.size() < jobs) {
      const sweep_cell* c = todo[next++];
      running[spawn_cell(options, dir, c->id)] = {c, clock_type::now()};
    }
    r.most_running = std::max(r.most_running, running.size());
    if (finished_one)
      report();
    finished_one = false;
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid == 0) {
      kill_over_time(running, options.cell_time_limit_s);
      ::usleep(20000);  // a signal cuts it short
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    }
    auto it = running.find(pid);
    if (it == running.end())
      continue;
    running_cell c = it->second;
    running.erase(it);
    ++r.ran;
    r.failed += reaped_ok(dir, options, c, status) ? 0 : 1;
    finished_one = true;
  }
  if (finished_one)
    report();
  r.wall_s = std::chrono::duration<double>(clock_type::now() - start).count();
  return r;
}

}  // namespace kvtier
