#pragma once

// The subcommands of the kvtier command line. Exit codes: 0 ok, 1 failure (including invariant
// violations), 2 bad input (command line, config, trace).

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kvtier {

enum exit_code { exit_ok = 0, exit_failure = 1, exit_bad_input = 2 };

/// Options shared by commands that read a config.
struct config_args {
  std::string config_file;
  std::vector<std::string> sets;
};

struct replay_args {
  config_args config;
  std::vector<std::string> traces;
  std::string format = "auto";
  std::string out_dir = "out/replay";
  std::string mode = "full";
  std::string clock = "virtual";
  double speed = 1.0;
  std::string backend = "modelled";
  bool verify = false;
  bool skip_bad_lines = false;
  uint64_t check_every = 0;
  uint64_t seed = 1;        ///< draws the seeded faults (faults.*, pd.failure_rate); nothing else is random
  bool seed_given = false;
  bool deterministic = false;
  bool quiet = false;
  bool print_plan = false;  ///< print the deployment plan (every key with its source) and stop
};

struct bench_serve_args {
  config_args config;
  std::string connect;
  std::string token;
  std::vector<std::string> traces;
  uint32_t clients = 8;
  uint32_t requests_per_step = 1;
  double seconds = 5;
  std::string json_out;
  int echo_port = 5599;
  /// closed: each engine's next calls wait for the last replies; open: each engine steps at
  /// fixed rates (`--open`, app/bench/bench_serve_open.cpp).
  enum class loop { closed, open } mode = loop::closed;
  std::vector<double> steps_per_s{10, 20, 50, 100, 200};  ///< open: offered loads, per engine
  uint32_t new_per_step = 4;                               ///< open: new requests per step
  double p99_bound_us = 1000;  ///< open: the verb p99 a saturated load stays under
  /// open: ZeroMQ I/O threads of the engines' context (their connections spread over them)
  int io_threads = 1;
  std::string csv_out;         ///< open: the curve as CSV
};
CLI::App* add_bench_serve_command(CLI::App& bench, bench_serve_args& args);
int run_bench_serve(const bench_serve_args& args);

struct serve_args {
  config_args config;
  std::string bind = "tcp://127.0.0.1:5557";
  std::string token;
  std::string curve_key_file;      ///< the server's CURVE secret key (needed off loopback)
  std::string curve_clients_file;  ///< CURVE public keys admitted (empty: any)
  double speed = 1.0;
  std::string events;         ///< empty: no KV events
  std::string events_replay;
  std::string metrics_host = "127.0.0.1";
  int metrics_port = -1;      ///< -1: no metrics endpoint
  std::string backend = "modelled";  ///< cuda: copies on the engine's tensors (real mode)
  bool verify = false;
};
CLI::App* add_serve_command(CLI::App& app, serve_args& args);
int run_serve(const serve_args& args);

struct engine_sim_args {
  config_args config;
  std::string connect = "tcp://127.0.0.1:5557";
  std::string token;
  std::string curve_server_key_file;  ///< the server's CURVE public key (empty: plaintext)
  std::string curve_key_file;         ///< this engine's CURVE secret key (empty: a fresh pair)
  std::vector<std::string> traces;
  std::string format = "auto";
  std::string out_dir = "out/engine-sim";
  double speed = 1.0;
  std::string name = "engine-sim";
  std::string print_hashes;
  bool quiet = false;
  std::string backend = "modelled";  ///< cuda: KV tensors on the GPU, exported to the server
  bool verify = false;
  uint32_t event_slots = 4;
  uint32_t swap_bench_blocks = 0;   ///< 0: replay the trace; else time a swap of this many
  uint32_t swap_bench_repeats = 5;
  /// kvtier: the server's controller owns the device tier (protocol versions 1, 2); engine:
  /// engine-sim's own allocator does, as a real engine's KV cache manager (version 3).
  std::string device_owner = "kvtier";
};
CLI::App* add_engine_sim_command(CLI::App& app, engine_sim_args& args);
int run_engine_sim(const engine_sim_args& args);

/// Adds `replay` to `app`; the returned subcommand runs run_replay(args) when chosen.
CLI::App* add_replay_command(CLI::App& app, replay_args& args);
int run_replay(const replay_args& args);

struct bench_replay_args {
  config_args config;
  std::vector<std::string> traces;
  uint32_t repeat = 3;
  std::string json_out;
  bool skip_full = false;
  uint32_t cluster_instances = 4;
  bool pd = false;  ///< also time a 1P+1D (direct handoff) replay of the same requests
};
CLI::App* add_bench_replay_command(CLI::App& bench, bench_replay_args& args);
int run_bench_replay(const bench_replay_args& args);

struct bench_transfer_args {
  config_args config;
  std::vector<uint32_t> block_sizes{16, 64};
  double gib = 2.0;
  uint32_t repetitions = 5;
  uint32_t idle_gap_ms = 0;  ///< the sweep also times each size after this long idle
  std::vector<uint32_t> condition_sizes;  ///< copy sizes of the copy-conditions probe
  std::string sweep_conditions = "replay";  ///< what the sweep's fit goes through
  bool no_verify = false;
  std::string json_out;
  std::string calibration_out;
  uint32_t calibration_block_size = 0;
};
CLI::App* add_bench_transfer_command(CLI::App& bench, bench_transfer_args& args);
int run_bench_transfer(const bench_transfer_args& args);

struct bench_emulation_args {
  config_args config;
  std::vector<std::string> traces;
  std::string calibration;
  bool no_verify = false;
  std::string json_out;
  std::string timeline_out;
  std::string steps_out;        ///< every compute step of both runs
  std::string calibration_out;  ///< the links' calibration fitted to the real run's copies
};
CLI::App* add_bench_emulation_command(CLI::App& bench, bench_emulation_args& args);
int run_bench_emulation(const bench_emulation_args& args);

struct bench_storage_args {
  config_args config;
  std::vector<std::string> backends{"memory", "redis", "file"};
  uint32_t batch = 8;
  uint64_t mib = 512;
  std::string json_out;
  std::string calibration_out;
  std::string calibration_backend = "file";
  double lone_gap_ms = 0;  ///< idle time before each lone request is timed
};
CLI::App* add_bench_storage_command(CLI::App& bench, bench_storage_args& args);
int run_bench_storage(const bench_storage_args& args);

CLI::App* add_config_command(CLI::App& app, config_args& args);
int run_config(const config_args& args);

struct model_info_args {
  config_args config;
  std::vector<uint64_t> prompts{1024, 8192, 32768};
  std::vector<uint32_t> batches{1, 32, 256};
  uint64_t context = 1024;
};
CLI::App* add_model_info_command(CLI::App& app, model_info_args& args);
int run_model_info(const model_info_args& args);

struct model_fit_args {
  std::string data = "measurements/step_times.json";
  std::string write_doc;
  std::string check;
  std::string json_out;
};
CLI::App* add_model_fit_command(CLI::App& app, model_fit_args& args);
int run_model_fit(const model_fit_args& args);

struct sweep_args {
  config_args config;
  std::vector<std::string> traces;
  std::vector<std::string> grids;
  std::string seeds;
  std::string file;
  std::string mode;    ///< empty: the sweep file's, else full
  std::string format;  ///< empty: the sweep file's, else auto
  std::string out_dir = "out/sweep";
  size_t jobs = 0;     ///< 0: the core count
  bool plan_only = false;
  std::string cell;
  bool collect_only = false;
  bool deterministic = false;
  bool quiet = false;
  std::string runner = "local";  ///< local or slurm (docs/sweep.md)
  size_t cells_per_task = 4;     ///< slurm: cells per array task
  bool retry_failed = false;     ///< slurm: resubmit cells that failed before
  double cell_time_limit_s = 0;  ///< 0: none; a cell running longer is killed and failed
  std::vector<std::string> sbatch_args;
  std::string task_file;         ///< a Slurm task's entry: its batches, one line per task
  size_t task = 0;               ///< with task_file: the line (SLURM_ARRAY_TASK_ID)
};
CLI::App* add_sweep_command(CLI::App& app, sweep_args& args);
int run_sweep(const sweep_args& args);

struct report_args {
  std::string dir;
  std::string title;
  // What the figures show (docs/sweep.md, "Reports"): passed to tools/sweep_report.py.
  std::string x, series, facet;
  std::vector<std::string> filters, metrics, scales;
  bool logx = false, logy = false;
  bool timeseries = false;  ///< dir is one replay's folder: plot its timeseries.csv
  double interval_s = 0;    ///< timeseries: seconds per point (0: ~200 points over the run)
  std::string out_dir;      ///< where report.md and plots/ go (empty: dir)
};
CLI::App* add_report_command(CLI::App& app, report_args& args);
int run_report(const report_args& args);

struct study_args {
  std::string name;
  bool list = false;
  std::string out_dir;
  size_t jobs = 0;
  std::vector<std::string> sets;
  bool plan_only = false;
  bool quiet = false;
};
CLI::App* add_study_command(CLI::App& app, study_args& args);
int run_study(const study_args& args);
/// A study whose file has a "search": the SLO capacity study (docs/sweep.md).
int run_slo_study_command(const std::string& path, const study_args& args);

/// The bundled sample trace (an excerpt of the Mooncake conversation trace).
std::string default_trace_path();
/// The sample scenario (configs/sample.json): what a replay or sweep given no trace replays the
/// bundled sample under, unless a config file or --set says otherwise: trace.time_scale=8, one
/// of eight instances' share of the cluster traffic it records, a load the default instance
/// sustains. As assignments, laid under --config and --set.
std::vector<std::string> sample_defaults();
std::string sample_scenario_path();
/// A file of the source tree (scripts, study files), found from the path CMake compiled in.
std::string source_file(const std::string& relative);

}  // namespace kvtier
