#!/usr/bin/env python3
"""Turns a kvtier SLO capacity study (kvtier study slo) into slo.md and a Pareto plot.

Reads DIR/slo.json (one row per configuration: the highest sustained rate under the SLO, the
p99s at it, the search's replays, the bytes each tier provisions; docs/sweep.md, "The SLO
capacity study") and writes DIR/slo.md (the table) and DIR/plots/slo_pareto.{svg,pdf,png}: the
cost of the host and storage tiers provisioned, at stated prices per GiB, against the sustained
load, one panel per trace set, the Pareto front (no configuration sustains more for less)
drawn through the configurations on it. Exit 2 on bad input.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = 1024.0 ** 3


def config_name(row, axes):
    return " ".join(f"{row[a]}" for a in axes if a != "traces")


def cost_usd(row, args):
    return (row["host_bytes"] / GIB * args.host_usd_per_gib
            + row["storage_bytes"] / GIB * args.storage_usd_per_gib)


def pareto_front(points):
    """The points no other point beats: at least as much load for no more cost, one strictly."""
    front = []
    for p in sorted(points, key=lambda q: (q[1], -q[0])):
        if not front or p[0] > front[-1][0]:
            front.append(p)
    return front


def write_table(path, data, args):
    axes = data["axes"]
    slo = data["slo"]
    lines = [
        "# SLO capacity",
        "",
        f"The highest arrival rate each configuration sustains with TTFT p99 <= "
        f"{slo['ttft_p99_ms']:g} ms and TPOT p99 <= {slo['tpot_p99_ms']:g} ms, searched "
        f"(doubling or halving the load until bracketed, then bisecting) until the "
        f"lowest failing rate is within {slo['precision'] * 100:g}% above it (or one session "
        f"copy); {data['replays']} replays in all. Rate: x the trace's recorded load, along the "
        f"row's axis: 1 / trace.time_scale, or trace.session_copies (copies of every session, "
        f"for closed-loop traces). Cost: host at ${args.host_usd_per_gib:g}/GiB, storage at "
        f"${args.storage_usd_per_gib:g}/GiB.",
        "",
        "| " + " | ".join(axes) + " | axis | sustained rate (x) | req/s | TTFT p99 (ms) | "
        "TPOT p99 (ms) | replays | search | host (GiB) | storage (GiB) | cost ($) |",
        "|" + "---|" * (len(axes) + 10),
    ]
    for r in data["rows"]:
        cells = [str(r[a]) for a in axes]
        cells.append(r.get("search_axis", "trace.time_scale").replace("trace.", ""))
        if r["sustained_rate_x"] > 0:
            cells += [f"{r['sustained_rate_x']:.4g}", f"{r['requests_per_s']:.3f}",
                      f"{r['ttft_p99_ms']:.0f}", f"{r['tpot_p99_ms']:.1f}"]
        else:
            cells += ["none", "", "", ""]
        cells += [str(r["iterations"]), r["outcome"], f"{r['host_bytes'] / GIB:.1f}",
                  f"{r['storage_bytes'] / GIB:.0f}", f"{cost_usd(r, args):,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "![Pareto: cost against sustained load](plots/slo_pareto.svg)", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def plot_pareto(out_base, data, args):
    axes = data["axes"]
    sets = sorted({r.get("traces", "trace") for r in data["rows"]})
    plt.rcParams.update({"font.size": 10})
    fig, panels = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), 3.6), squeeze=False)
    for panel, name in zip(panels[0], sets):
        rows = [r for r in data["rows"] if r.get("traces", "trace") == name
                and r["sustained_rate_x"] > 0]
        points = [(r["requests_per_s"], cost_usd(r, args), config_name(r, axes)) for r in rows]
        # Configurations that land on one point (to 3 digits: the same number of whole session
        # copies may finish a few requests' worth apart) share one marker and a stacked label.
        labels = {}
        for x, y, label in points:
            labels.setdefault((float(f"{x:.3g}"), y), []).append(label)
        for (x, y), names in labels.items():
            panel.scatter([x], [y], s=28, zorder=3)
            panel.annotate("\n".join(names), (x, y), fontsize=7, xytext=(4, -4),
                           textcoords="offset points", va="top")
        front = pareto_front(points)
        if front:
            panel.plot([p[0] for p in front], [p[1] for p in front], "k--", lw=1,
                       label="Pareto front", zorder=2)
            panel.legend(loc="upper left", fontsize=8)
        panel.margins(x=0.15, y=0.2)
        panel.set_title(name)
        panel.set_xlabel("sustained load under the SLO (req/s)")
        panel.set_ylabel("host + storage cost ($)")
        panel.grid(alpha=0.3)
    slo = data["slo"]
    fig.suptitle(f"Cost against sustained load (TTFT p99 <= {slo['ttft_p99_ms']:g} ms, "
                 f"TPOT p99 <= {slo['tpot_p99_ms']:g} ms)", fontsize=10)
    fig.tight_layout()
    for ext in ("svg", "pdf", "png"):
        fig.savefig(f"{out_base}.{ext}", dpi=200)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="the study's folder (holding slo.json)")
    p.add_argument("--host-usd-per-gib", type=float, default=4.0,
                   help="price of host memory, $ per GiB (default 4: server DDR5)")
    p.add_argument("--storage-usd-per-gib", type=float, default=0.08,
                   help="price of storage, $ per GiB (default 0.08: datacentre NVMe)")
    args = p.parse_args()
    path = os.path.join(args.dir, "slo.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"slo_report: {path}: {e}", file=sys.stderr)
        return 2
    os.makedirs(os.path.join(args.dir, "plots"), exist_ok=True)
    write_table(os.path.join(args.dir, "slo.md"), data, args)
    plot_pareto(os.path.join(args.dir, "plots", "slo_pareto"), data, args)
    print(f"slo_report: {args.dir}/slo.md, {args.dir}/plots/slo_pareto.svg/.pdf/.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
