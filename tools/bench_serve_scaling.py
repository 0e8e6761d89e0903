#!/usr/bin/python3
"""The core-scaling table of tools/bench-serve-scaling.

  bench_serve_scaling.py OUT_DIR K...

Reads OUT_DIR/serverK/open-TRACE.json for each server core count K (written by
tools/bench-serve --open with the server pinned to K cores), and writes OUT_DIR/scaling.json
and OUT_DIR/scaling.md (each written whole, then renamed): per trace and core count, the
highest load carried (>= 95% of offered and verb p99 under the bound), verb p99 and p999 at
50 steps/s per engine, the cores each side ran on, and the carried load on 8 cores against 2.
"""
import glob
import json
import os
import sys

REFERENCE_RATE = 50.0  # steps/s per engine: the "8 engines x 50 steps/s" point


def write_whole(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def point_at(points, rate):
    for p in points:
        if abs(p["offered_steps_per_s_per_engine"] - rate) < 1e-9:
            return p
    return None


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: bench_serve_scaling.py OUT_DIR K...\n")
        return 2
    out, counts = argv[1], [int(k) for k in argv[2:]]
    rows = []
    for k in counts:
        files = sorted(glob.glob(os.path.join(out, "server%d" % k, "open-*.json")))
        if not files:
            sys.stderr.write("bench_serve_scaling.py: no open-*.json under %s/server%d\n" % (out, k))
            return 1
        for path in files:
            with open(path) as f:
                j = json.load(f)
            trace = os.path.basename(path)[len("open-"):-len(".json")]
            ref = point_at(j["points"], REFERENCE_RATE)
            rows.append({
                "trace": trace,
                "server_core_count": k,
                "server_cores": j.get("server_cores", ""),
                "client_cores": j.get("client_cores", ""),
                "engines": j["engines"],
                "new_per_step": j["new_per_step"],
                "saturation_steps_per_s_per_engine": j["saturation_steps_per_s_per_engine"],
                "saturation_steps_per_s": j["saturation_steps_per_s"],
                "verb_p99_us_at_50": ref["rows"]["verbs"]["p99_us"] if ref else None,
                "verb_p999_us_at_50": ref["rows"]["verbs"]["p999_us"] if ref else None,
                "kvtier_version": j.get("kvtier_version", ""),
            })
    ratios = {}
    for trace in sorted({r["trace"] for r in rows}):
        by_k = {r["server_core_count"]: r["saturation_steps_per_s"] for r in rows
                if r["trace"] == trace}
        if 2 in by_k and 8 in by_k and by_k[2] > 0:
            ratios[trace] = by_k[8] / by_k[2]
    versions = sorted({r["kvtier_version"] for r in rows})
    doc = {"rows": rows, "carried_8_over_2": ratios, "kvtier_version": versions,
           "reference_steps_per_s_per_engine": REFERENCE_RATE}
    write_whole(os.path.join(out, "scaling.json"), json.dumps(doc, indent=2) + "\n")

    def us(v):
        return "-" if v is None else "{:,.0f} µs".format(v)

    lines = ["Core scaling of kvtier serve (tools/bench-serve-scaling), %s" % "; ".join(versions),
             "",
             "| trace | server cores | client cores | highest carried load, steps/s per engine "
             "(all engines) | verb p99 at 50 steps/s | p999 at 50 |",
             "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["trace"], r["server_core_count"])):
        lines.append("| %s | %d (%s) | %s | %g (%g) | %s | %s |" % (
            r["trace"], r["server_core_count"], r["server_cores"], r["client_cores"],
            r["saturation_steps_per_s_per_engine"], r["saturation_steps_per_s"],
            us(r["verb_p99_us_at_50"]), us(r["verb_p999_us_at_50"])))
    lines.append("")
    for trace, ratio in sorted(ratios.items()):
        lines.append("%s: carried load on 8 server cores / on 2 = %.2fx (target at least 3x)"
                     % (trace, ratio))
    if not ratios:
        lines.append("8 cores against 2: not measured (both counts needed)")
    write_whole(os.path.join(out, "scaling.md"), "\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
