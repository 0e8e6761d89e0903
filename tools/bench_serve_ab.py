#!/usr/bin/python3
"""The table of tools/bench-serve-ab: two builds of kvtier serve, alternated.

  bench_serve_ab.py OUT_DIR REPS BUILD...

Reads OUT_DIR/runI-BUILD/open-TRACE.json (tools/bench-serve --open) for every run I and build,
and writes OUT_DIR/ab.json and OUT_DIR/ab.md (each written whole, then renamed): per trace,
offered load and build, the medians over the runs of verb p50/p99/p999, of the first second's
verb p99 and of the p99 of the seconds after it (a fresh server's start-up penalty, issue target:
within 2x) and of the server's CPU seconds over the run (all its threads: what the build
costs, which the busy machine's latencies may hide), with each run's p99 beside them, and each
build's kvtier version.
"""
import collections
import glob
import json
import os
import statistics
import sys


def write_whole(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def read_runs(out, reps, builds):
    """(trace, load, build) -> [per-run figures]; build -> versions; the cores seen."""
    points, versions, cores = collections.defaultdict(list), collections.defaultdict(set), set()
    for i in range(1, reps + 1):
        for b in builds:
            files = sorted(glob.glob(os.path.join(out, "run%d-%s" % (i, b), "open-*.json")))
            if not files:
                raise SystemExit("bench_serve_ab.py: no open-*.json under %s/run%d-%s" % (out, i, b))
            for path in files:
                trace = os.path.basename(path)[len("open-"):-len(".json")]
                with open(path) as f:
                    j = json.load(f)
                cores.add("server cores %s, client cores %s"
                          % (j.get("server_cores", "?"), j.get("client_cores", "?")))
                for p in j["points"]:
                    v = p["rows"]["verbs"]
                    points[(trace, p["offered_steps_per_s_per_engine"], b)].append({
                        "offered": p["offered_steps_per_s"], "achieved": p["achieved_steps_per_s"],
                        "p50_us": v["p50_us"], "p99_us": v["p99_us"], "p999_us": v["p999_us"],
                        "first_s_p99_us": p.get("first_second_verb_p99_us"),
                        # 0: the load lasted one second, nothing after the first
                        "steady_p99_us": p.get("after_first_second_verb_p99_us") or None})
        for b in builds:
            log = os.path.join(out, "run%d-%s.txt" % (i, b))
            if os.path.exists(log):
                with open(log) as f:
                    for line in f:
                        if line.startswith("kvtier:"):
                            versions[b].add(line.split(":", 1)[1].strip())
                for trace, cpu in server_cpu(log).items():
                    for key, runs in points.items():
                        if key[0] == trace and key[2] == b and len(runs) >= i:
                            runs[i - 1]["server_cpu_s"] = cpu
    return points, versions, cores


def server_cpu(log):
    """trace -> the server's CPU seconds over its run, from a tools/bench-serve log."""
    out, trace = {}, None
    with open(log) as f:
        for line in f:
            if line.startswith("trace:"):
                trace = line.split()[1]
            elif line.startswith("server:") and "s of CPU" in line and trace:
                out[trace] = float(line.split()[1])
    return out


def median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main(argv):
    if len(argv) < 4:
        sys.stderr.write("usage: bench_serve_ab.py OUT_DIR REPS BUILD...\n")
        return 2
    out, reps, builds = argv[1], int(argv[2]), argv[3:]
    points, versions, cores = read_runs(out, reps, builds)
    rows = []
    for (trace, rate, b), runs in sorted(points.items(), key=lambda kv: (kv[0][0], kv[0][1], builds.index(kv[0][2]))):
        row = {"trace": trace, "steps_per_s_per_engine": rate, "build": b,
               "offered": runs[0]["offered"], "runs": len(runs),
               "p99_us_each": [r["p99_us"] for r in runs]}
        for key in ("achieved", "p50_us", "p99_us", "p999_us", "first_s_p99_us", "steady_p99_us",
                    "server_cpu_s"):
            row[key + "_median"] = median_of(runs, key)
        first, steady = row["first_s_p99_us_median"], row["steady_p99_us_median"]
        row["first_over_steady"] = first / steady if first and steady else None
        rows.append(row)
    doc = {"rows": rows, "kvtier_version": {b: sorted(v) for b, v in versions.items()},
           "cores": sorted(cores), "runs": reps}
    write_whole(os.path.join(out, "ab.json"), json.dumps(doc, indent=2) + "\n")

    def us(v):
        return "-" if v is None else "{:,.0f}".format(v)

    lines = ["Two builds of kvtier serve, alternated (tools/bench-serve-ab), %d runs; %s" % (reps, "; ".join(sorted(cores)))]
    for b in builds:
        lines.append("- %s: %s" % (b, "; ".join(sorted(versions.get(b, [])))))
    lines += ["", "| trace | steps/s per engine | offered | build | achieved (median) | verb p50 | "
              "verb p99 | verb p999 | first second's p99 | p99 after it | first / after | "
              "server CPU, s | p99 of each run |",
              "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = "-" if r["first_over_steady"] is None else "%.2fx" % r["first_over_steady"]
        cpu = "-" if r["server_cpu_s_median"] is None else "%.2f" % r["server_cpu_s_median"]
        lines.append("| %s | %g | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["trace"], r["steps_per_s_per_engine"], r["offered"], r["build"],
            us(r["achieved_median"]), us(r["p50_us_median"]), us(r["p99_us_median"]),
            us(r["p999_us_median"]), us(r["first_s_p99_us_median"]), us(r["steady_p99_us_median"]),
            ratio, cpu, ", ".join(us(x) for x in r["p99_us_each"])))
    write_whole(os.path.join(out, "ab.md"), "\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
