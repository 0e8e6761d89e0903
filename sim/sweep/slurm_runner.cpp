#include "sim/sweep/slurm_runner.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "runtime/config/options.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/sweep/local_runner.hpp"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct command_output {
  int status = -1;
  std::string text;
};

command_output run_command(const std::string& cmd) {
  command_output r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p)
    return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    r.text.append(buf, n);
  r.status = ::pclose(p);
  return r;
}

// The cluster's MaxArraySize (an array's task ids must stay below it); Slurm's default when
// the configuration does not say.
size_t max_array_size() {
  command_output r = run_command("scontrol show config");
  std::istringstream in(r.text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MaxArraySize", 0) != 0)
      continue;
    auto eq = line.find('=');
    if (eq != std::string::npos)
      return std::max<size_t>(1, std::stoul(line.substr(eq + 1)));
  }
  return 1001;
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

bool job_running(const std::string& job_id) {
  command_output r = run_command("squeue -h -o %i -j " + shell_quote(job_id));
  // Once the job has left the queue, squeue prints nothing, or (purged) an error.
  return r.status == 0 && r.text.find_first_not_of(" \n") != std::string::npos;
}

std::string submit(const std::string& dir, const std::string& task_file, size_t tasks,
                   const slurm_run_options& options) {
  std::string wrap = shell_quote(options.self) + " sweep --out " + shell_quote(dir)
                     + " --task-file " + shell_quote(task_file)
                     + " --task \"$SLURM_ARRAY_TASK_ID\" --quiet";
  std::string cmd = "sbatch --parsable --job-name=kvtier-sweep --array=0-"
                    + std::to_string(tasks - 1) + " --output="
                    + shell_quote(dir + "/slurm/%A_%a.out");
  for (const auto& a : options.sbatch_args)
    cmd += " " + shell_quote(a);
  cmd += " --wrap=" + shell_quote(wrap);
  command_output r = run_command(cmd);
  std::string id = r.text.substr(0, r.text.find_first_of(";\n"));
  if (r.status != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch failed: " + r.text);
  return id;
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
  std::vector<std::string> todo;
  for (const auto& c : plan.cells) {
    auto status = cell_status(dir, c.id);
    if (cell_done(dir, c.id))
      ++r.skipped;
    else if (status && status->value("status", "") == "failed" && !options.retry_failed)
      ++r.failed_kept;
    else
      todo.push_back(c.id);
  }
  if (todo.empty())
    return r;
  size_t per_task = std::max<size_t>(1, options.cells_per_task);
  size_t limit = max_array_size();
  if ((todo.size() + per_task - 1) / per_task > limit) {
    per_task = (todo.size() + limit - 1) / limit;
    if (options.progress)
      std::cerr << "sweep: " << per_task << " cells per task, to keep the array within "
                << "MaxArraySize=" << limit << '\n';
  }
  std::string task_file = next_task_file(dir);
  atomic_file f(task_file);
  for (size_t i = 0; i < todo.size(); ++i)
    f.out() << todo[i] << ((i + 1) % per_task == 0 || i + 1 == todo.size() ? '\n' : ' ');
  f.commit();
  r.tasks = (todo.size() + per_task - 1) / per_task;
  r.submitted = todo.size();
  r.job_id = submit(dir, task_file, r.tasks, options);
  if (options.progress)
    std::cerr << "sweep: submitted " << todo.size() << " cells as Slurm job array " << r.job_id
              << " (" << r.tasks << " tasks of up to " << per_task << " cells)\n";
  size_t reported = static_cast<size_t>(-1);
  while (job_running(r.job_id)) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_s));
    size_t done = 0;
    for (const auto& id : todo)
      done += cell_status(dir, id).has_value();
    if (options.progress && done != reported)
      std::cerr << "sweep: " << done << "/" << todo.size() << " submitted cells ended\n";
    reported = done;
  }
  for (size_t i = 0; i < todo.size(); ++i)
    if (!cell_status(dir, todo[i]))
      record_worker_end(dir, todo[i], "its Slurm task (job " + r.job_id + ", task "
                        + std::to_string(i / per_task) + ", log " + dir + "/slurm/" + r.job_id
                        + "_" + std::to_string(i / per_task) + ".out) ended without running it");
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

int run_slurm_task(const std::string& dir, const sweep_plan& plan, const std::string& task_file,
                   size_t task, size_t jobs) {
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
  local_run_options options;
  options.self = self_executable();
  options.jobs = jobs;
  options.progress = false;
  local_run_result r = run_local(dir, mine, options);
  return r.failed > 0 ? 1 : 0;
}

}  // namespace kvtier
