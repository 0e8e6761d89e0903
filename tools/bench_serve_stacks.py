#!/usr/bin/python3
"""Summarises tools/bench-serve-stacks: one controller stack against a stack per engine.

Reads OUT_DIR/runI/open-TRACE-LAYOUT.json for I in 1..REPS (tools/bench-serve --open with
BENCH_SERVE_STACKS set) and writes OUT_DIR/stacks.json and OUT_DIR/stacks.md: per trace, offered
load and layout, the median over the runs of the achieved steps/s and of verb p50, p99 and p999,
with each run's p99 in run order; and per trace and layout the median of the server's CPU time
over the curve (runI.txt's "server: ... s of CPU" line). Medians, because on a shared machine one run's p99 can be
another process's doing.
  bench_serve_stacks.py OUT_DIR REPS
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


def cpu_seconds(path):
    """(trace, layout) -> the server's CPU seconds over the curve, from a tools/bench-serve log."""
    out, trace, layout = {}, None, None
    with open(path) as f:
        for line in f:
            if line.startswith("trace:"):
                trace = line.split()[1]
            elif line.startswith("stacks:"):
                layout = line.split()[1]
            elif line.startswith("server:") and "s of CPU" in line and trace and layout:
                out[(trace, layout)] = float(line.split()[1])
    return out


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: bench_serve_stacks.py OUT_DIR REPS\n")
        return 2
    out, reps = argv[1], int(argv[2])
    points = collections.defaultdict(list)
    versions, machines = set(), set()
    for i in range(1, reps + 1):
        files = sorted(glob.glob(os.path.join(out, "run%d" % i, "open-*.json")))
        if not files:
            sys.stderr.write("bench_serve_stacks.py: no open-*.json under %s/run%d\n" % (out, i))
            return 1
        for path in files:
            name = os.path.basename(path)[len("open-"):-len(".json")]
            trace, _, layout = name.rpartition("-")
            with open(path) as f:
                j = json.load(f)
            versions.add(j.get("kvtier_version", ""))
            machines.add("server cores %s, client cores %s" % (j.get("server_cores", "?"),
                                                               j.get("client_cores", "?")))
            for p in j["points"]:
                v = p["rows"]["verbs"]
                points[(trace, p["offered_steps_per_s_per_engine"], layout)].append({
                    "offered": p["offered_steps_per_s"], "achieved": p["achieved_steps_per_s"],
                    "p50_us": v["p50_us"], "p99_us": v["p99_us"], "p999_us": v["p999_us"]})
    cpu = collections.defaultdict(list)
    for i in range(1, reps + 1):
        log = os.path.join(out, "run%d.txt" % i)
        if os.path.exists(log):
            for key, seconds in cpu_seconds(log).items():
                cpu[key].append(seconds)
    rows = []
    for (trace, per_engine, layout), runs in sorted(points.items()):
        med = lambda k: statistics.median(r[k] for r in runs)
        rows.append({"trace": trace, "steps_per_s_per_engine": per_engine, "layout": layout,
                     "offered": runs[0]["offered"], "runs": len(runs),
                     "achieved_median": med("achieved"), "p50_us_median": med("p50_us"),
                     "p99_us_median": med("p99_us"), "p999_us_median": med("p999_us"),
                     "p99_us_each": [r["p99_us"] for r in runs],
                     "achieved_each": [r["achieved"] for r in runs]})
    cpu_rows = [{"trace": t, "layout": l, "cpu_s_median": statistics.median(v), "cpu_s_each": v}
                for (t, l), v in sorted(cpu.items())]
    doc = {"rows": rows, "server_cpu": cpu_rows, "kvtier_version": sorted(versions),
           "cores": sorted(machines)}
    write_whole(os.path.join(out, "stacks.json"), json.dumps(doc, indent=2) + "\n")
    lines = ["One controller stack against one per engine (tools/bench-serve-stacks), %d runs; %s; %s"
             % (reps, "; ".join(sorted(versions)), "; ".join(sorted(machines))), "",
             "| trace | steps/s per engine | offered | layout | achieved (median) | verb p50 | "
             "verb p99 | verb p999 | p99 of each run |",
             "|---|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append("| %s | %g | %g | %s | %s | %s | %s | %s | %s |" % (
            r["trace"], r["steps_per_s_per_engine"], r["offered"], r["layout"],
            "{:,.0f}".format(r["achieved_median"]), "{:,.0f}".format(r["p50_us_median"]),
            "{:,.0f}".format(r["p99_us_median"]), "{:,.0f}".format(r["p999_us_median"]),
            ", ".join("{:,.0f}".format(x) for x in r["p99_us_each"])))
    if cpu_rows:
        lines += ["", "| trace | layout | server CPU over the curve, s (median) | each run |",
                  "|---|---|---:|---|"]
        for r in cpu_rows:
            lines.append("| %s | %s | %.2f | %s |" % (r["trace"], r["layout"], r["cpu_s_median"],
                                                     ", ".join("%.2f" % x for x in r["cpu_s_each"])))
    write_whole(os.path.join(out, "stacks.md"), "\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
