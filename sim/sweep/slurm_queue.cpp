#include "sim/sweep/slurm_queue.hpp"

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace kvtier {

namespace {

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

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep))
    parts.push_back(part);
  return parts;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// "3", "[4-7,9%2]" (pending tasks not yet split apart): the task ids it names.
std::vector<size_t> task_ids(std::string spec) {
  std::vector<size_t> ids;
  if (!spec.empty() && spec.front() == '[') {
    spec = spec.substr(1, spec.find(']') == std::string::npos ? std::string::npos
                                                                : spec.find(']') - 1);
    spec = spec.substr(0, spec.find('%'));  // a limit on tasks running at once
  }
  for (const auto& range : split(spec, ',')) {
    auto dash = range.find('-');
    std::string lo = range.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi))
      continue;
    for (size_t i = std::stoul(lo); i <= std::stoul(hi); ++i)
      ids.push_back(i);
  }
  return ids;
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool slurm_task_live(const std::string& state) {
  for (const char* s : {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED",
                        "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING",
                        "STAGE_OUT", "STOPPED", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
    if (state == s)
      return true;
  return false;
}

std::map<size_t, slurm_task_state> parse_array_states(const std::string& job_id,
                                                      const std::string& text) {
  std::map<size_t, slurm_task_state> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto fields = split(line, '|');
    if (fields.size() < 2)
      continue;
    std::string id = fields[0];
    std::string prefix = job_id + "_";
    if (id.rfind(prefix, 0) != 0)
      continue;  // another job, or a job step (12_3.batch)
    std::string tasks = id.substr(prefix.size());
    if (tasks.find('.') != std::string::npos)
      continue;
    slurm_task_state st;
    st.state = fields[1].substr(0, fields[1].find(' '));  // "CANCELLED by 0"
    if (fields.size() > 2 && fields[2] != "None" && fields[2] != "(null)" && !all_digits(
          fields[2].substr(0, fields[2].find(':'))))  // sacct's third field is the exit code
      st.reason = fields[2];
    for (size_t t : task_ids(tasks))
      out[t] = st;
  }
  return out;
}

std::optional<std::map<size_t, slurm_task_state>> slurm_array_states(const std::string& job_id) {
  command_output q = run_command("squeue -h -r -t all -j " + shell_quote(job_id)
                                 + " -o '%i|%T|%r'");
  if (q.status == 0) {
    auto states = parse_array_states(job_id, q.text);
    if (!states.empty())
      return states;
  } else if (q.text.find("Invalid job id") == std::string::npos) {
    throw std::runtime_error("squeue failed: " + q.text);
  }
  // slurmctld has forgotten the job (MinJobAge): accounting may remember it.
  command_output a = run_command("sacct -n -P -X -j " + shell_quote(job_id)
                                 + " -o JobID,State,ExitCode");
  if (a.status == 0) {
    auto states = parse_array_states(job_id, a.text);
    if (!states.empty())
      return states;
  }
  return std::nullopt;
}

std::map<std::string, std::string> slurm_live_sweeps() {
  std::map<std::string, std::string> out;
  command_output q = run_command("squeue -h --name=kvtier-sweep -o '%A|%k'");
  if (q.status != 0)
    throw std::runtime_error("squeue failed: " + q.text);
  std::istringstream in(q.text);
  std::string line;
  while (std::getline(in, line)) {
    auto bar = line.find('|');
    if (bar != std::string::npos && all_digits(line.substr(0, bar)))
      out[line.substr(bar + 1)] = line.substr(0, bar);
  }
  return out;
}

std::string slurm_submit(const slurm_submission& s) {
  bool requeue = false;
  for (const auto& a : s.sbatch_args)
    requeue = requeue || a == "--requeue";
  // --no-requeue: a task whose node fails ends NODE_FAIL and its cells are reported, rather
  // than run again later behind the runner's back (--sbatch=--requeue asks for that instead).
  std::string cmd = "sbatch --parsable --job-name=kvtier-sweep"
                    + std::string(requeue ? "" : " --no-requeue")
                    + " --comment=" + shell_quote(s.task_file)
                    + " --array=0-" + std::to_string(s.tasks - 1)
                    + " --output=" + shell_quote(s.log_pattern);
  for (const auto& a : s.sbatch_args)
    cmd += " " + shell_quote(a);
  cmd += " --wrap=" + shell_quote(s.command);
  command_output r = run_command(cmd);
  std::string id = r.text.substr(0, r.text.find_first_of(";\n"));
  if (r.status != 0 || !all_digits(id))
    throw std::runtime_error("sbatch failed: " + r.text);
  return id;
}

size_t slurm_max_array_size() {
  command_output r = run_command("scontrol show config");
  std::istringstream in(r.text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MaxArraySize", 0) != 0)
      continue;
    auto eq = line.find('=');
    if (eq != std::string::npos) {
      std::string v = line.substr(eq + 1);
      v = v.substr(v.find_first_not_of(' '));
      if (all_digits(v))
        return std::max<size_t>(1, std::stoul(v));
    }
  }
  return 1001;
}

}  // namespace kvtier
