#include "sim/sweep/slurm_runner.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/config/options.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/sweep/local_runner.hpp"
#include "sim/sweep/slurm_queue.hpp"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

// One array this folder submitted: its batches (DIR/slurm/tasks-N.txt, a line per task) and
// its job id (tasks-N.job; empty when the runner died before writing it).
struct slurm_array {
  std::string task_file;
  std::string job_id;
  std::vector<std::vector<std::string>> tasks;
};

std::string job_file(const std::string& task_file) {
  return task_file.substr(0, task_file.size() - 4) + ".job";
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::vector<std::vector<std::string>> read_tasks(const std::string& task_file) {
  std::vector<std::vector<std::string>> tasks;
  std::ifstream in(task_file);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ids(line);
    tasks.emplace_back();
    for (std::string id; ids >> id;)
      tasks.back().push_back(id);
  }
  return tasks;
}

void write_text(const std::string& path, const std::string& text) {
  atomic_file f(path);
  f.out() << text;
  f.commit();
}

// The folder's arrays, oldest first (tasks-1, tasks-2, ...).
std::vector<slurm_array> read_arrays(const std::string& dir) {
  std::vector<slurm_array> arrays;
  for (size_t n = 1;; ++n) {
    std::string path = dir + "/slurm/tasks-" + std::to_string(n) + ".txt";
    if (!fs::exists(path))
      break;
    arrays.push_back({path, read_line(job_file(path)), read_tasks(path)});
  }
  return arrays;
}

// A runner killed between sbatch and writing the job id leaves an array without one: while the
// array lives, squeue finds it by its comment (the task file).
void recover_job_ids(std::vector<slurm_array>& arrays) {
  bool missing = false;
  for (const auto& a : arrays)
    missing = missing || a.job_id.empty();
  if (!missing)
    return;
  auto live = slurm_live_sweeps();
  for (auto& a : arrays)
    if (a.job_id.empty() && live.count(a.task_file)) {
      a.job_id = live[a.task_file];
      write_text(job_file(a.task_file), a.job_id + "\n");
    }
}

// Where a cell was last submitted: (array, task).
using placement = std::pair<const slurm_array*, size_t>;

std::map<std::string, placement> latest_placements(const std::vector<slurm_array>& arrays) {
  std::map<std::string, placement> out;
  for (const auto& a : arrays)
    for (size_t t = 0; t < a.tasks.size(); ++t)
      for (const auto& id : a.tasks[t])
        out[id] = {&a, t};
  return out;
}

using array_states = std::map<std::string, std::optional<std::map<size_t, slurm_task_state>>>;

array_states states_of(const std::vector<slurm_array>& arrays) {
  array_states out;
  for (const auto& a : arrays)
    if (!a.job_id.empty())
      out[a.job_id] = slurm_array_states(a.job_id);
  return out;
}

const slurm_task_state* task_state(const array_states& states, const placement& p) {
  auto it = states.find(p.first->job_id);
  if (it == states.end() || !it->second)
    return nullptr;
  auto t = it->second->find(p.second);
  return t == it->second->end() ? nullptr : &t->second;
}

bool placement_live(const array_states& states, const placement& p) {
  const slurm_task_state* st = task_state(states, p);
  return st && slurm_task_live(st->state);
}

std::string task_name(const std::string& dir, const placement& p) {
  const std::string& job = p.first->job_id;
  std::string t = std::to_string(p.second);
  return "Slurm job " + (job.empty() ? std::string("(id not recorded)") : job) + " task " + t
         + " (log " + dir + "/slurm/" + job + "_" + t + ".out)";
}

// Why a cell whose task has ended left no result of its own: the task's end as Slurm names it.
std::string ended_text(const std::string& dir, const std::string& id, const placement& p,
                       const slurm_task_state* st) {
  bool started = fs::exists(cell_dir(dir, id) + "/log.txt");
  std::string when = started ? "while this cell ran" : "before this cell started";
  std::string task = task_name(dir, p);
  if (!st)
    return task + " left the queue without this cell's result; how it ended is unknown (squeue "
                  "no longer lists the job and sacct has no record of it)";
  const std::string& s = st->state;
  std::string reason = st->reason.empty() ? "" : ", reason " + st->reason;
  if (s == "CANCELLED")
    return task + " was cancelled (scancel" + reason + ") " + when;
  if (s == "NODE_FAIL")
    return task + " lost its node (NODE_FAIL" + reason + ") " + when;
  if (s == "TIMEOUT")
    return task + " reached its time limit (TIMEOUT) " + when
           + ": raise --cell-time-limit or --sbatch=--time";
  if (s == "PREEMPTED" || s == "BOOT_FAIL" || s == "DEADLINE" || s == "OUT_OF_MEMORY")
    return task + " ended " + s + reason + " " + when;
  return task + " ended " + s + reason + " without this cell's result";
}

// Records why each cell placed in an ended task has no result. Returns how many it recorded.
size_t settle(const std::string& dir, const std::vector<std::string>& ids,
              const std::map<std::string, placement>& placed, const array_states& states) {
  size_t n = 0;
  for (const auto& id : ids) {
    auto p = placed.find(id);
    if (p == placed.end() || placement_live(states, p->second))
      continue;
    const slurm_task_state* st = task_state(states, p->second);
    auto status = cell_status(dir, id);
    // A task that was signalled knows only that; Slurm knows whether it was scancel, a lost
    // node or the time limit.
    bool better = status && status->value("provisional", false) && st;
    if (status && !better)
      continue;
    record_cell_failure(dir, id, ended_text(dir, id, p->second, st));
    ++n;
  }
  return n;
}

std::string next_task_file(const std::string& dir) {
  std::string slurm = dir + "/slurm";
  make_directories(slurm);
  for (size_t n = 1;; ++n) {
    std::string path = slurm + "/tasks-" + std::to_string(n) + ".txt";
    if (!fs::exists(path))
      return path;
  }
}

bool has_option(const std::vector<std::string>& args, const char* long_name, const char* brief) {
  for (const auto& a : args)
    if (a.rfind(std::string(long_name) + "=", 0) == 0 || a == long_name
        || a.rfind(brief, 0) == 0)
      return true;
  return false;
}

std::string number_text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// sbatch options the runner adds unless given: a CPU per cell running at once, and, with a
// per-cell time limit, a task time limit that fits its batch (with a minute to spare).
std::vector<std::string> sbatch_args_of(const slurm_run_options& o, size_t per_task) {
  std::vector<std::string> args = o.sbatch_args;
  size_t jobs = std::max<size_t>(1, o.jobs);
  if (jobs > 1 && !has_option(args, "--cpus-per-task", "-c"))
    args.push_back("--cpus-per-task=" + std::to_string(jobs));
  if (o.cell_time_limit_s > 0 && !has_option(args, "--time", "-t")) {
    double rounds = std::ceil(static_cast<double>(per_task) / static_cast<double>(jobs));
    double minutes = std::ceil((rounds * o.cell_time_limit_s + 60) / 60);
    args.push_back("--time=" + number_text(minutes));
  }
  return args;
}

std::string task_command(const std::string& dir, const std::string& task_file,
                         const slurm_run_options& o) {
  std::string cmd = shell_quote(o.self) + " sweep --out " + shell_quote(dir) + " --task-file "
                    + shell_quote(task_file) + " --task \"$SLURM_ARRAY_TASK_ID\" --jobs "
                    + std::to_string(std::max<size_t>(1, o.jobs));
  if (o.cell_time_limit_s > 0)
    cmd += " --cell-time-limit " + number_text(o.cell_time_limit_s);
  return cmd;
}

// Writes the batches of `todo` and submits them as one array; returns it (recorded).
slurm_array submit_array(const std::string& dir, const std::vector<std::string>& todo,
                         const slurm_run_options& options) {
  size_t per_task = std::max<size_t>(1, options.cells_per_task);
  size_t limit = slurm_max_array_size();
  if ((todo.size() + per_task - 1) / per_task > limit) {
    per_task = (todo.size() + limit - 1) / limit;
    if (options.progress)
      std::cerr << "sweep: " << per_task << " cells per task, to keep the array within "
                << "MaxArraySize=" << limit << '\n';
  }
  slurm_array a;
  a.task_file = next_task_file(dir);
  std::string lines;
  for (size_t i = 0; i < todo.size(); ++i) {
    if (i % per_task == 0)
      a.tasks.emplace_back();
    a.tasks.back().push_back(todo[i]);
    lines += todo[i] + ((i + 1) % per_task == 0 || i + 1 == todo.size() ? "\n" : " ");
  }
  write_text(a.task_file, lines);
  // A retried cell's old status and log go before its task can start, so that what the cell
  // leaves is this array's.
  for (const auto& id : todo)
    clear_cell_status(dir, id);
  slurm_submission s;
  s.task_file = a.task_file;
  s.tasks = a.tasks.size();
  s.command = task_command(dir, a.task_file, options);
  s.log_pattern = dir + "/slurm/%A_%a.out";
  s.sbatch_args = sbatch_args_of(options, per_task);
  a.job_id = slurm_submit(s);
  write_text(job_file(a.task_file), a.job_id + "\n");
  if (options.progress)
    std::cerr << "sweep: submitted " << todo.size() << " cells as Slurm job array " << a.job_id
              << " (" << a.tasks.size() << " tasks of up to " << per_task << " cells, "
              << std::max<size_t>(1, options.jobs) << " at once in each)\n";
  return a;
}

// squeue failing (slurmctld restarting, unreachable) is waited out for a while, not taken for
// the arrays' end.
array_states poll_states(const std::vector<slurm_array>& arrays, double poll_s) {
  constexpr double give_up_s = 300;
  double failing_s = 0;
  for (;;) {
    try {
      return states_of(arrays);
    } catch (const std::runtime_error& e) {
      if (failing_s >= give_up_s)
        throw std::runtime_error(std::string(e.what()) + " (for " + number_text(give_up_s)
                                 + " s; the arrays may still run: run the same command again "
                                   "later, it waits for them)");
      std::cerr << "sweep: " << e.what() << "; trying again\n";
      std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
      failing_s += poll_s;
    }
  }
}

}  // namespace

std::string self_executable_path() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw std::runtime_error("cannot find this program (/proc/self/exe): " + ec.message());
  return p.string();
}

slurm_run_result run_slurm(const std::string& dir_in, const sweep_plan& plan,
                           const slurm_run_options& options) {
  auto start = std::chrono::steady_clock::now();
  std::string dir = fs::absolute(dir_in).lexically_normal().string();  // tasks run elsewhere
  slurm_run_result r;
  std::vector<slurm_array> arrays = read_arrays(dir);
  arrays.reserve(arrays.size() + 1);  // placements point into it
  recover_job_ids(arrays);
  std::vector<std::string> ids;
  for (const auto& c : plan.cells)
    ids.push_back(c.id);
  auto placed = latest_placements(arrays);
  array_states states = poll_states(arrays, options.poll_s);
  r.settled += settle(dir, ids, placed, states);
  std::vector<std::string> todo, watched;
  std::set<std::string> waiting_jobs;
  for (const auto& id : ids) {
    auto p = placed.find(id);
    bool live = p != placed.end() && placement_live(states, p->second);
    auto status = cell_status(dir, id);
    if (cell_done(dir, id)) {
      ++r.skipped;
    } else if (live) {
      ++r.adopted;  // its task will run it: never a second copy
      watched.push_back(id);
      waiting_jobs.insert(p->second.first->job_id);
    } else if (status && status->value("status", "") == "failed" && !options.retry_failed) {
      ++r.failed_kept;
    } else {
      todo.push_back(id);
    }
  }
  r.waited_for.assign(waiting_jobs.begin(), waiting_jobs.end());
  if (options.progress && r.adopted > 0)
    std::cerr << "sweep: " << r.adopted << " cells are still queued or running in Slurm job(s) "
              << [&] {
                   std::string s;
                   for (const auto& j : r.waited_for)
                     s += (s.empty() ? "" : ", ") + j;
                   return s;
                 }()
              << ": waiting for them, not submitting them again\n";
  if (!todo.empty()) {
    arrays.push_back(submit_array(dir, todo, options));
    r.job_id = arrays.back().job_id;
    r.tasks = arrays.back().tasks.size();
    r.submitted = todo.size();
    watched.insert(watched.end(), todo.begin(), todo.end());
    placed = latest_placements(arrays);
  }
  size_t reported = static_cast<size_t>(-1);
  for (;;) {
    states = poll_states(arrays, options.poll_s);
    bool any_live = false;
    for (const auto& id : watched) {
      auto p = placed.find(id);
      any_live = any_live || (p != placed.end() && placement_live(states, p->second));
    }
    size_t ended = 0;
    for (const auto& id : watched)
      ended += cell_status(dir, id).has_value();
    if (options.progress && ended != reported && !watched.empty())
      std::cerr << "sweep: " << ended << "/" << watched.size() << " cells in Slurm ended\n";
    reported = ended;
    if (!any_live)
      break;
    std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_s));
  }
  r.settled += settle(dir, watched, placed, states);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::map<std::string, std::string> slurm_cell_notes(const std::string& dir_in,
                                                    const sweep_plan& plan) {
  std::string dir = fs::absolute(dir_in).lexically_normal().string();
  std::map<std::string, std::string> notes;
  std::vector<slurm_array> arrays = read_arrays(dir);
  if (arrays.empty())
    return notes;
  auto placed = latest_placements(arrays);
  array_states states;
  try {
    recover_job_ids(arrays);
    states = states_of(arrays);
  } catch (const std::runtime_error& e) {
    for (const auto& c : plan.cells)
      if (placed.count(c.id))
        notes[c.id] = "submitted as " + task_name(dir, placed.at(c.id)) + "; its state is "
                      "unknown: " + e.what();
    return notes;
  }
  for (const auto& c : plan.cells) {
    auto p = placed.find(c.id);
    if (p == placed.end())
      continue;
    const slurm_task_state* st = task_state(states, p->second);
    notes[c.id] = st && slurm_task_live(st->state)
                    ? "queued or running in " + task_name(dir, p->second) + " (" + st->state
                        + "): collect again when it ends"
                    : ended_text(dir, c.id, p->second, st);
  }
  return notes;
}

int run_slurm_task(const std::string& dir, const sweep_plan& plan, const std::string& task_file,
                   size_t task, size_t jobs, double cell_time_limit_s, bool progress) {
  std::ifstream in(task_file);
  if (!in)
    throw config_error(task_file + ": cannot read the task file");
  std::string line;
  for (size_t i = 0; i <= task; ++i)
    if (!std::getline(in, line))
      throw config_error(task_file + ": no task " + std::to_string(task));
  std::istringstream ids(line);
  sweep_plan mine;
  mine.axes = plan.axes;
  mine.build = plan.build;
  for (std::string id; ids >> id;) {
    bool found = false;
    for (const auto& c : plan.cells)
      if (c.id == id) {
        mine.cells.push_back(c);
        found = true;
      }
    if (!found)
      throw config_error("cell " + id + " of " + task_file + ": not in " + dir + "/plan.json");
  }
  const char* job = std::getenv("SLURM_ARRAY_JOB_ID");
  local_run_options options;
  options.self = self_executable();
  options.jobs = jobs;
  options.progress = progress;
  options.cell_time_limit_s = cell_time_limit_s;
  options.stopped_as = std::string("its Slurm task (job ") + (job ? job : "?") + ", task "
                       + std::to_string(task) + ")";
  local_run_result r = run_local(dir, mine, options);
  std::cerr << "sweep task " << task << ": " << mine.cells.size() << " cells, " << r.skipped
            << " already done, " << r.ran << " run, at most " << r.most_running
            << " at once (--jobs " << jobs << "), " << r.failed << " failed\n";
  return r.failed > 0 ? 1 : 0;
}

}  // namespace kvtier
