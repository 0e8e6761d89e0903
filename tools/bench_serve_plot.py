#!/usr/bin/env python3
"""Plots the open-loop curve of `kvtier bench serve --open` (tools/bench-serve --open).

Reads one or more open-TRACE.csv files (offered steps/s per engine, achieved, p50/p99/p999 of
every verb call and of lookup, allocate and step messages; BENCHMARKS.md, "The open-loop curve")
and writes OUT (png; svg beside it): verb p99 against offered load, one line per file, points
beyond saturation hollow. Exit 2 on bad input.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_curve(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "verbs_p99_us" not in rows[0]:
        raise ValueError(f"{path}: not an open-loop curve")
    return rows


def main(argv):
    if len(argv) < 3:
        print("usage: bench_serve_plot.py OUT.png CURVE.csv...", file=sys.stderr)
        return 2
    out, paths = argv[1], argv[2:]
    try:
        curves = [(p, read_curve(p)) for p in paths]
    except (OSError, ValueError) as e:
        print(f"bench_serve_plot.py: {e}", file=sys.stderr)
        return 2
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path, rows in curves:
        name = os.path.splitext(os.path.basename(path))[0].removeprefix("open-")
        x = [float(r["offered_steps_per_s"]) for r in rows]
        y = [float(r["verbs_p99_us"]) / 1000.0 for r in rows]
        line, = ax.plot(x, y, marker="o", label=f"{name} verb p99")
        for xi, yi, r in zip(x, y, rows):
            if r["within"] != "1":
                ax.plot([xi], [yi], marker="o", mfc="white", color=line.get_color())
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="1 ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (steps/s, all engines)")
    ax.set_ylabel("verb p99 (ms)")
    ax.set_title("kvtier serve, open loop (hollow: beyond saturation)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    fig.savefig(os.path.splitext(out)[0] + ".svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
