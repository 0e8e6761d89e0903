"""Plots one replay's timeseries.csv (output.timeseries; schema: docs/outputs.md): what happened
when over the run, in points of a chosen interval (by default a round number of seconds that
gives about 200 points), five panels sharing the time axis: requests waiting and running; the
hit ratio (prompt tokens found cached, of those admitted in the interval); the PCIe links' GB/s
(H2D, D2H); the storage links' GB/s (read, write: apart from the PCIe panel, so that D2H and
storage writes, equal under write-through, do not hide each other); ready blocks per tier.
GB/s come from each link's blocks per second, scaled so that they add up to summary.json's
bytes. Written as OUT/plots/timeseries.png (300 dpi), .svg and .pdf.
"""
import csv
import json
import math
import os

import report_figures as rf


class BadSeries(Exception):
    pass


LINKS = ["h2d", "d2h", "storage_read", "storage_write"]
NICE = [1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400]


def read(folder):
    path = os.path.join(folder, "timeseries.csv")
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise BadSeries(f"{path}: no time series here (replay with --set output.timeseries=true)"
                        f" ({e.strerror})")
    if not rows or "second" not in rows[0]:
        raise BadSeries(f"{path}: not a kvtier time series")
    missing = [f"{link}_blocks" for link in LINKS if f"{link}_blocks" not in rows[0]]
    if missing:
        raise BadSeries(f"{path}: no {', '.join(missing)} columns (written by an older kvtier: "
                        "replay it again)")
    try:
        return {k: [float(r[k]) for r in rows] for k in rows[0]}
    except ValueError as e:
        raise BadSeries(f"{path}: {e}")


def link_bytes(folder):
    """summary.json's bytes per link, if it is there (to turn blocks into bytes)."""
    try:
        with open(os.path.join(folder, "summary.json")) as f:
            traffic = json.load(f)["traffic"]
        return {link: float(traffic[f"{link}_bytes"]) for link in LINKS}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def default_interval(seconds):
    """The round interval nearest (on a log scale) a 200th of the run: about 200 points."""
    want = max(seconds / 200, 1)
    if want >= NICE[-1]:
        return NICE[-1] * round(want / NICE[-1])
    return min(NICE, key=lambda n: abs(math.log(n / want)))


def binned(values, width, mean=True):
    """Consecutive seconds gathered `width` at a time: their mean (a rate or a level) or sum."""
    out = []
    for k in range(0, len(values), width):
        part = values[k:k + width]
        out.append(sum(part) / len(part) if mean else sum(part))
    return out


def plot(folder, out, title="", interval=0):
    s = read(folder)
    seconds = len(s["second"])
    width = max(1, int(round(interval))) if interval else default_interval(seconds)
    t = [k * width + width / 2 for k in range(math.ceil(seconds / width))]
    hit = [a + b + c for a, b, c in zip(s["device_hit_tokens"], s["host_hit_tokens"],
                                        s["storage_hit_tokens"])]
    hits, computed = binned(hit, width, False), binned(s["computed_tokens"], width, False)
    ratio = [h / (h + c) if h + c > 0 else None for h, c in zip(hits, computed)]
    # The run's hit ratio so far: smooth where the interval's own jumps with each burst.
    so_far, total_hits, total_all = [], 0.0, 0.0
    for h, c in zip(hits, computed):
        total_hits, total_all = total_hits + h, total_all + h + c
        so_far.append(total_hits / total_all if total_all > 0 else None)
    total = link_bytes(folder)
    if not total:
        raise BadSeries(f"{folder}/summary.json: not found or without traffic bytes (the time "
                        "series' GB/s come from it)")
    gbps = {}
    for link in LINKS:
        blocks = s[f"{link}_blocks"]
        per_block = total[link] / sum(blocks) if sum(blocks) > 0 else 0
        gbps[link] = [b * per_block / 1e9 for b in binned(blocks, width)]
    fig, axs = rf.plt.subplots(5, 1, sharex=True, figsize=(rf.COLUMN_W + 0.4, 7.6),
                               constrained_layout=True)
    panels = [
        ("requests", [(binned(s["waiting_requests"], width), "waiting"),
                      (binned(s["running_requests"], width), "running")], None),
        ("hit ratio", [(ratio, f"each {width} s"), (so_far, "since the start")], (0, 1)),
        ("PCIe (GB/s)", [(gbps["h2d"], "H2D"), (gbps["d2h"], "D2H")], None),
        ("storage (GB/s)", [(gbps["storage_read"], "read"),
                            (gbps["storage_write"], "write")], None),
        ("ready blocks", [(binned(s["device_blocks"], width), "device"),
                          (binned(s["host_blocks"], width), "host")], None),
    ]
    for ax, (ylabel, lines, ylim) in zip(axs, panels):
        for i, (ys, label) in enumerate(lines):
            if any(y for y in ys if y is not None):
                st = rf.style(i)
                # Intervals where no request was admitted have no hit ratio: the line joins
                # the intervals that have one.
                have = [(x, y) for x, y in zip(t, ys) if y is not None]
                ax.plot([x for x, _ in have], [y for _, y in have], label=label,
                        color=st["color"], linestyle=st["linestyle"], linewidth=0.8)
        ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # Above the panel, off the data.
            ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False, ncol=2,
                      borderaxespad=0.1, handlelength=1.6, columnspacing=0.8)
    fig.suptitle(rf.title_text(fig, (title + ": " if title else "") + "What happened when? "
                              f"Queue, hit ratio and link traffic over the run, in {width} s "
                              "points"), fontweight="bold")
    axs[-1].set_xlabel("time (s of the replay's clock)")
    path = rf.save(fig, out, "timeseries", "")
    print(f"report: {os.path.join(out, path)} (and .svg, .pdf; {len(t)} points of {width} s)")
