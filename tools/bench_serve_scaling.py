#!/usr/bin/python3
"""The core-scaling table of tools/bench-serve-scaling.

  bench_serve_scaling.py OUT_DIR K...

Reads OUT_DIR/serverK/open-TRACE.json for each server core count K (written by
tools/bench-serve --open with the server pinned to K cores), and writes OUT_DIR/scaling.json
and OUT_DIR/scaling.md (each written whole, then renamed): per trace and core count, the
highest load carried (>= 95% of offered and verb p99 under the bound), verb p99 and p999 at
50 steps/s per engine, the cores each side ran on, and the carried load on 8 cores against 2.

A carried load is only known between the loads tried: one that carried the highest load tried
is a lower bound ("at_least"), one that carried none of them is below the lowest
("below_lowest"), and the ratio says which it is (a lower bound, or not measured) rather than
print a figure the grid made.
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


def carried_bound(points, carried):
    """How far the highest carried load is known: "exact" (a higher load tried was not
    carried), "at_least" (the highest load tried was carried) or "below_lowest" (none was)."""
    tried = [p["offered_steps_per_s_per_engine"] for p in points]
    if not tried or carried <= 0:
        return "below_lowest"
    return "at_least" if carried >= max(tried) else "exact"


def ratio_of(rows, trace):
    """Carried load on 8 server cores over 2 for `trace`, as (value, bound): bound "exact",
    or "at_least" where 8 cores carried the highest load tried. (None, None) where no figure
    can be given: a count is missing, or 2 cores' load is not exact (none carried: no
    denominator; the highest carried: the ratio could be anything below or above)."""
    by_k = {r["server_core_count"]: r for r in rows if r["trace"] == trace}
    if 2 not in by_k or 8 not in by_k:
        return None, None
    two, eight = by_k[2], by_k[8]
    if two["carried_bound"] != "exact":
        return None, None
    if eight["carried_bound"] == "below_lowest":
        return 0.0, "exact"
    return (eight["saturation_steps_per_s"] / two["saturation_steps_per_s"],
            eight["carried_bound"])


def why_unmeasured(rows, trace):
    by_k = {r["server_core_count"]: r for r in rows if r["trace"] == trace}
    if 2 not in by_k or 8 not in by_k:
        return "both 2 and 8 server cores needed"
    if by_k[2]["carried_bound"] == "below_lowest":
        return "2 cores carried none of the loads tried: try lower loads"
    return "2 cores carried the highest load tried: try higher loads"


def describe_carried(r):
    per_engine, total = r["saturation_steps_per_s_per_engine"], r["saturation_steps_per_s"]
    if r["carried_bound"] == "below_lowest":
        return "none of %s tried" % r["loads_tried"]
    text = "%g (%g)" % (per_engine, total)
    return ">= " + text + ", the highest tried" if r["carried_bound"] == "at_least" else text


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
                "carried_bound": carried_bound(j["points"],
                                               j["saturation_steps_per_s_per_engine"]),
                "loads_tried": ", ".join("%g" % p["offered_steps_per_s_per_engine"]
                                         for p in j["points"]),
                "verb_p99_us_at_50": ref["rows"]["verbs"]["p99_us"] if ref else None,
                "verb_p999_us_at_50": ref["rows"]["verbs"]["p999_us"] if ref else None,
                "kvtier_version": j.get("kvtier_version", ""),
            })
    ratios, bounds, unmeasured = {}, {}, []
    for trace in sorted({r["trace"] for r in rows}):
        value, bound = ratio_of(rows, trace)
        if bound is None:
            unmeasured.append(trace)
            continue
        ratios[trace], bounds[trace] = value, bound
    versions = sorted({r["kvtier_version"] for r in rows})
    doc = {"rows": rows, "carried_8_over_2": ratios, "carried_8_over_2_bound": bounds,
           "kvtier_version": versions, "reference_steps_per_s_per_engine": REFERENCE_RATE}
    write_whole(os.path.join(out, "scaling.json"), json.dumps(doc, indent=2) + "\n")

    def us(v):
        return "-" if v is None else "{:,.0f} µs".format(v)

    lines = ["Core scaling of kvtier serve (tools/bench-serve-scaling), %s" % "; ".join(versions),
             "",
             "| trace | server cores | client cores | highest carried load, steps/s per engine "
             "(all engines) | verb p99 at 50 steps/s | p999 at 50 |",
             "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["trace"], r["server_core_count"])):
        lines.append("| %s | %d (%s) | %s | %s | %s | %s |" % (
            r["trace"], r["server_core_count"], r["server_cores"], r["client_cores"],
            describe_carried(r), us(r["verb_p99_us_at_50"]), us(r["verb_p999_us_at_50"])))
    lines.append("")
    for trace, ratio in sorted(ratios.items()):
        at_least = bounds[trace] == "at_least"
        lines.append("%s: carried load on 8 server cores / on 2 = %s%.2fx%s (target at least 3x)"
                     % (trace, ">= " if at_least else "", ratio,
                        ", 8 cores carried the highest load tried" if at_least else ""))
    for trace in unmeasured:
        lines.append("%s: 8 cores against 2: not measured (%s)" % (trace, why_unmeasured(rows, trace)))
    write_whole(os.path.join(out, "scaling.md"), "\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
