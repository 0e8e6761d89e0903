#!/usr/bin/env python3
"""Turns a kvtier SLO capacity study (kvtier study slo) into slo.md and a Pareto plot.

Reads DIR/slo.json (one row per configuration: the highest sustained rate under the SLO, the
p99s at it, the search's replays, the bytes each tier provisions; docs/sweep.md, "The SLO
capacity study") and writes DIR/slo.md (the table) and DIR/plots/slo_pareto.{svg,pdf,png}: the
cost of the host and storage tiers provisioned, at stated prices per GiB, against the sustained
load, one panel per trace set, the Pareto front (no configuration sustains more for less, loads
within the search's precision counting as equal) drawn through the configurations on it. Exit 2
on bad input.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_figures as rf  # noqa: E402  (the reports' fonts, Type 42 in PDFs, and palette)
from matplotlib.ticker import MaxNLocator  # noqa: E402

plt = rf.plt
GIB = 1024.0 ** 3


def config_name(row, axes):
    return ", ".join(rf.value_text(a, row[a]) for a in axes if a != "traces")


def cost_usd(row, args):
    return (row["host_bytes"] / GIB * args.host_usd_per_gib
            + row["storage_bytes"] / GIB * args.storage_usd_per_gib)


def pareto_front(points, precision):
    """The points no other point beats, (rate x, req/s, cost, name) each: a point is beaten by
    one that costs no more and sustains at least as much load, one of the two by more than a tie
    (cost lower; rate x above by more than the search's precision, which cannot tell rates
    closer than that apart: within it the cheaper configuration wins). Sorted by cost."""
    def beats(a, b):
        more = a[0] > b[0] * (1 + precision)
        as_much = a[0] * (1 + precision) >= b[0]
        return a[2] <= b[2] and as_much and (a[2] < b[2] or more)
    front = [p for p in points if not any(beats(q, p) for q in points if q is not p)]
    return sorted(front, key=lambda p: (p[2], p[1]))


def trace_names(folder, data):
    """{trace set: "file, file"} from the plan (the study's traces), for the panels' titles."""
    try:
        with open(os.path.join(folder, "plan.json")) as f:
            cells = json.load(f)["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    out = {}
    for c in cells:
        files = [os.path.basename(t) for t in c.get("traces", [])]
        text = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]}, ...)"
        out.setdefault(c.get("trace_set", "traces"), text)
    if len(out) == 1:  # one trace set: its rows carry no "traces" column
        name, text = next(iter(out.items()))
        out["traces"] = (f"{rf.value_text('traces', name)} ({text})" if name != "traces"
                         else text)
    return out


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


def separate_labels(fig, notes):
    """Moves a point's label below any earlier label it would overlap: two configurations
    close in load and cost would otherwise print their names over each other."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    points_per_pixel = 72.0 / fig.dpi
    placed = []
    for note in notes:
        for _ in range(len(notes)):
            box = note.get_window_extent(renderer)
            hit = next((b for b in placed if box.overlaps(b)), None)
            if hit is None:
                break
            dx, dy = note.xyann
            note.xyann = (dx, dy - (box.y1 - hit.y0 + 2) * points_per_pixel)
        placed.append(note.get_window_extent(renderer))


def plot_pareto(out_base, data, args, folder):
    axes = data["axes"]
    names = trace_names(folder, data)
    sets = sorted({r.get("traces", "traces") for r in data["rows"]})
    precision = data["slo"].get("precision", 0.05)
    fig, panels = plt.subplots(1, len(sets), figsize=(min(7.2, 3.5 * len(sets)), 3.2),
                               squeeze=False, constrained_layout=True)
    notes = []
    for panel, name in zip(panels[0], sets):
        rows = [r for r in data["rows"] if r.get("traces", "traces") == name
                and r["sustained_rate_x"] > 0]
        points = [(r["sustained_rate_x"], r["requests_per_s"], cost_usd(r, args),
                   config_name(r, axes)) for r in rows]
        front = pareto_front(points, precision)
        # Configurations that land on one point (to 3 digits: the same number of whole session
        # copies may finish a few requests' worth apart) share one marker and a stacked label.
        labels = {}
        for rate, x, y, label in points:
            labels.setdefault((float(f"{x:.3g}"), y), []).append((label, (rate, x, y, label) in front))
        xs = [x for x, _ in labels] or [0]
        middle = (min(xs) + max(xs)) / 2
        for k, ((x, y), named) in enumerate(labels.items()):
            on_front = any(f for _, f in named)
            st = rf.style(k)
            panel.scatter([x], [y], s=30, zorder=3, marker=st["marker"],
                          facecolors=st["color"] if on_front else "none",
                          edgecolors=st["color"], linewidths=1.0)
            right = x > middle  # labels point inwards, inside the panel
            notes.append(panel.annotate("\n".join(n for n, _ in named), (x, y), fontsize=7,
                                        xytext=(-5 if right else 5, -4),
                                        textcoords="offset points", va="top",
                                        ha="right" if right else "left"))
        if front:
            panel.plot([p[1] for p in front], [p[2] for p in front], color="black",
                       linestyle="--", lw=0.9, label="Pareto front (filled markers)", zorder=2)
            panel.legend(loc="upper left", frameon=False)
        panel.margins(x=0.25, y=0.25)
        panel.set_title(names.get(name, name) if name == "traces"
                        else f"{rf.value_text('traces', name)} ({names.get(name, name)})")
        panel.xaxis.set_major_locator(MaxNLocator(4))
        panel.set_xlabel("sustained load under the SLO (req/s)")
        panel.set_ylabel("host + storage cost ($)")
        panel.grid(alpha=0.3)
    slo = data["slo"]
    separate_labels(fig, notes)
    fig.suptitle("Which configuration sustains the most load for its cost?\n" + rf.title_text(
        fig, f"SLO: TTFT p99 <= {slo['ttft_p99_ms'] / 1000:g} s, TPOT p99 <= "
             f"{slo['tpot_p99_ms']:g} ms; loads within {precision * 100:g}% (the search's "
             "precision) tie"), fontweight="bold")
    for ext in ("svg", "pdf", "png"):
        fig.savefig(f"{out_base}.{ext}", dpi=rf.DPI, bbox_inches="tight", pad_inches=0.03)
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
    plot_pareto(os.path.join(args.dir, "plots", "slo_pareto"), data, args, args.dir)
    print(f"slo_report: {args.dir}/slo.md, {args.dir}/plots/slo_pareto.svg/.pdf/.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
