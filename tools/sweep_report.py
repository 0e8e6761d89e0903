#!/usr/bin/env python3
"""Turns a kvtier sweep folder into report.md with comparison tables and plots (PNG and SVG).

Reads DIR/results.json (one row per cell, every summary figure flattened; docs/outputs.md) and,
for the TTFT CDF, each full-mode cell's requests.csv. Cells that differ only by seed are averaged.
The "series" axis (the one named like *policy*, else the first) gives the plots' colours; a
numeric *_tokens / *_blocks axis is the capacity axis. Exit 2 on bad input, 1 on failure.
"""
import argparse
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4, "int8": 1}

# (column or derived name, heading, unit scale, format, better)
METRICS = [
    ("hit_ratio.tokens", "hit ratio", 1, "{:.4f}", "max"),
    ("hit_ratio.by_tier.device.tokens", "device hits", 1, "{:.4f}", "max"),
    ("hit_ratio.by_tier.host.tokens", "host hits", 1, "{:.4f}", "max"),
    ("hit_ratio.by_tier.storage.tokens", "storage hits", 1, "{:.4f}", "max"),
    ("latency_ms.ttft.p50", "TTFT p50 (ms)", 1, "{:.1f}", "min"),
    ("latency_ms.ttft.p99", "TTFT p99 (ms)", 1, "{:.1f}", "min"),
    ("latency_ms.tpot.p50", "TPOT p50 (ms)", 1, "{:.2f}", "min"),
    ("latency_ms.tpot.p99", "TPOT p99 (ms)", 1, "{:.2f}", "min"),
    ("h2d_gb", "H2D (GB)", 1, "{:.3f}", "min"),
    ("d2h_gb", "D2H (GB)", 1, "{:.3f}", "min"),
    ("storage_read_gb", "storage read (GB)", 1, "{:.3f}", "min"),
    ("storage_write_gb", "storage write (GB)", 1, "{:.3f}", "min"),
    ("write_amp_host", "D2H / KV computed", 1, "{:.3f}", "min"),
    ("write_amp_storage", "storage write / KV computed", 1, "{:.3f}", "min"),
]


class BadInput(Exception):
    pass


def num(v):
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def derive(row):
    """Adds byte figures in GB and write amplification; hit-rate cells get bytes from counts."""
    layers, heads, dim = (num(row.get("config.model." + k)) for k in ("layers", "kv_heads", "head_dim"))
    dtype = DTYPE_BYTES.get(row.get("config.model.kv_dtype"), 2)
    block = num(row.get("config.cache.block_size"))
    per_token = 2 * layers * heads * dim * dtype if None not in (layers, heads, dim) else None
    gb = 1e9
    if num(row.get("traffic.d2h_bytes")) is not None:
        for src, dst in (("traffic.h2d_bytes", "h2d_gb"), ("traffic.d2h_bytes", "d2h_gb"),
                         ("traffic.storage_read_bytes", "storage_read_gb"),
                         ("traffic.storage_write_bytes", "storage_write_gb")):
            row[dst] = num(row.get(src)) / gb
        computed = num(row.get("steps.prefill_tokens"))
    elif per_token and block and num(row.get("transfers.backups")) is not None:
        per_block = per_token * block / gb
        t = lambda k: num(row.get("transfers." + k)) or 0.0
        row["h2d_gb"] = t("swap_ins") * per_block
        row["d2h_gb"] = (t("backups") + t("write_backs")) * per_block
        row["storage_read_gb"] = t("storage_loads") * per_block
        row["storage_write_gb"] = t("storage_stores") * per_block
        hits = sum(num(row.get("hits.tokens." + t_)) or 0.0 for t_ in ("device", "host", "storage"))
        computed = (num(row.get("trace.input_tokens")) or 0.0) - hits
    else:
        computed = None
    if per_token and computed:
        kv_gb = computed * per_token / gb
        row["write_amp_host"] = row["d2h_gb"] / kv_gb
        row["write_amp_storage"] = row["storage_write_gb"] / kv_gb
    return row


def load(folder):
    path = os.path.join(folder, "results.json")
    try:
        with open(path) as f:
            results = json.load(f)
        axes, rows = results["axes"], results["rows"]
    except (OSError, ValueError, KeyError) as e:
        raise BadInput(f"{path}: not a sweep's results ({e})")
    ok = [derive(dict(r)) for r in rows if r.get("status") == "ok"]
    if not ok:
        raise BadInput(f"{path}: no finished cell to report")
    return axes, rows, ok


def group(rows, axes):
    """Cells that differ only by seed, averaged: [(values tuple, {metric: mean}, [rows])]."""
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r.get(a) for a in axes), []).append(r)
    out = []
    for key, members in groups.items():
        means = {}
        for m, *_ in METRICS:
            vals = [num(r.get(m)) for r in members]
            vals = [v for v in vals if v is not None]
            if vals:
                means[m] = sum(vals) / len(vals)
        out.append((key, means, members))
    return out


def capacity_axis(axes, rows):
    for a in axes:
        if (a.endswith("_tokens") or a.endswith("_blocks")) and all(num(r.get(a)) is not None for r in rows):
            return a
    return None


def series_axis(axes, capacity):
    for a in axes:
        if "policy" in a and a != capacity:
            return a
    rest = [a for a in axes if a != capacity]
    return rest[0] if rest else None


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def table(groups, axes):
    shown = [m for m in METRICS if any(m[0] in g[1] for g in groups)]
    best = {}
    for m, _, _, _, better in shown:
        vals = [g[1][m] for g in groups if m in g[1]]
        if vals and max(vals) != min(vals):
            best[m] = max(vals) if better == "max" else min(vals)
    lines = ["| " + " | ".join(axes + [h for _, h, _, _, _ in shown]) + " |",
             "|" + "---|" * (len(axes) + len(shown))]
    for key, means, _ in groups:
        cells = [str(k) for k in key]
        for m, _, _, fmt, _ in shown:
            if m not in means:
                cells.append("")
                continue
            text = fmt.format(means[m])
            cells.append(f"**{text}**" if m in best and means[m] == best[m] else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


SUFFIX = [""]  # appended to plot names: one set of plots per trace set
BUILD = [""]  # the footer of every plot: the kvtier build that made the cells


def build_text(rows):
    """The kvtier build(s) the cells name (summary.json's `kvtier`; docs/outputs.md, Provenance)."""
    builds = ordered(f"kvtier {r.get('kvtier.version') or 'unknown'} (commit "
                     f"{r.get('kvtier.commit') or 'unknown'}, {r.get('kvtier.build_type') or '?'})"
                     for r in rows)
    if len(builds) == 1:
        return builds[0]
    return "several builds: " + "; ".join(builds)


def save(fig, folder, name):
    name += SUFFIX[0]
    os.makedirs(os.path.join(folder, "plots"), exist_ok=True)
    paths = []
    if BUILD[0]:
        fig.text(0.99, 0.005, "made by " + BUILD[0], ha="right", va="bottom", fontsize=6,
                 color="gray")
    for ext in ("png", "svg"):
        p = os.path.join("plots", f"{name}.{ext}")
        fig.savefig(os.path.join(folder, p), dpi=90)
        paths.append(p)
    plt.close(fig)
    return paths[0]


def short_number(x):
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:g}{unit}"
    return f"{x:g}"


def mean_by(rows, key_axis, metric, where=lambda r: True):
    """Per value of key_axis: (mean, min, max) of metric over the matching rows."""
    out = {}
    for v in ordered(r.get(key_axis) for r in rows):
        vals = [num(r.get(metric)) for r in rows if r.get(key_axis) == v and where(r)]
        vals = [x for x in vals if x is not None]
        if vals:
            out[v] = (sum(vals) / len(vals), min(vals), max(vals))
    return out


def plot_hit_ratio(folder, rows, series, capacity):
    tiers = [("hit_ratio.tokens", "all tiers"), ("hit_ratio.by_tier.device.tokens", "device"),
             ("hit_ratio.by_tier.host.tokens", "host"), ("hit_ratio.by_tier.storage.tokens", "storage")]
    fig, axs = plt.subplots(1, 4, figsize=(14, 3.6), sharey=True)
    names = ordered(r.get(series) for r in rows) if series else [None]
    xs_all = sorted({num(r.get(capacity)) for r in rows})
    for ax, (metric, title) in zip(axs, tiers):
        for name in names:
            sel = [r for r in rows if series is None or r.get(series) == name]
            xs = sorted({num(r.get(capacity)) for r in sel})
            ys = []
            for x in xs:
                vals = [num(r.get(metric)) for r in sel if num(r.get(capacity)) == x]
                vals = [v for v in vals if v is not None]
                ys.append(sum(vals) / len(vals) if vals else math.nan)
            ax.plot(xs, ys, marker="o", label=str(name) if name is not None else "all cells")
        ax.set_xscale("log")
        ax.set_xticks(xs_all)
        ax.set_xticklabels([short_number(x) for x in xs_all], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title)
        ax.set_xlabel(f"{capacity} (tokens)" if capacity.endswith("_tokens") else f"{capacity} (blocks)")
        ax.grid(alpha=0.3)
    axs[0].set_ylabel("hit ratio (tokens, fraction of prompt)")
    axs[-1].legend(fontsize=7)
    fig.suptitle("Hit ratio per tier against capacity (mean over other grid values and seeds)")
    fig.tight_layout()
    return save(fig, folder, "hit_ratio_vs_capacity")


def bar_plot(folder, rows, series, metrics, ylabel, title, name):
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(ordered(r.get(series) for r in rows))), 4))
    names = ordered(r.get(series) for r in rows)
    width = 0.8 / len(metrics)
    for i, (metric, label) in enumerate(metrics):
        stats = mean_by(rows, series, metric)
        xs = [j + i * width for j in range(len(names))]
        means = [stats.get(n, (math.nan,) * 3)[0] for n in names]
        # max(0, ...): a mean of equal values may land a rounding error beyond them
        lo = [max(0.0, m - stats.get(n, (math.nan,) * 3)[1]) for n, m in zip(names, means)]
        hi = [max(0.0, stats.get(n, (math.nan,) * 3)[2] - m) for n, m in zip(names, means)]
        ax.bar(xs, means, width, yerr=[lo, hi], capsize=2, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
    ax.set_xticklabels([str(n) for n in names], rotation=20, ha="right", fontsize=8)
    ax.set_xlabel(series)
    ax.set_ylabel(ylabel)
    ax.set_title(title + "\n(mean over other grid values and seeds; error bars: min to max)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save(fig, folder, name)


def plot_ttft_cdf(folder, rows, series):
    fig, ax = plt.subplots(figsize=(7, 4))
    drew = False
    for name in ordered(r.get(series) for r in rows):
        ttft = []
        for r in rows:
            if r.get(series) != name:
                continue
            path = os.path.join(folder, "cells", r["cell"], "requests.csv")
            try:
                with open(path) as f:
                    for rec in csv.DictReader(f):
                        if rec.get("first_token_s") and rec.get("arrival_s"):
                            ttft.append(float(rec["first_token_s"]) - float(rec["arrival_s"]))
            except OSError:
                continue
        if not ttft:
            continue
        ttft.sort()
        n = len(ttft)
        ax.plot(ttft, [(i + 1) / n for i in range(n)], label=str(name))
        drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TTFT CDF per " + series + " (requests of every cell pooled)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save(fig, folder, "ttft_cdf")


def section(folder, rows, axes, full, heading):
    """One trace set's table and plots, as markdown lines."""
    groups = group(rows, axes)
    capacity = capacity_axis(axes, rows)
    series = series_axis(axes, capacity)
    md = [f"## {heading}", "", table(groups, axes), ""]
    plots = []
    if capacity:
        plots.append(("Hit ratio per tier against " + capacity, plot_hit_ratio(folder, rows, series, capacity)))
    if series:
        if full:
            plots.append(("TTFT and TPOT per " + series, bar_plot(
                folder, rows, series,
                [("latency_ms.ttft.p50", "TTFT p50"), ("latency_ms.ttft.p99", "TTFT p99"),
                 ("latency_ms.tpot.p50", "TPOT p50"), ("latency_ms.tpot.p99", "TPOT p99")],
                "latency (ms)", "TTFT and TPOT per " + series, "latency")))
        plots.append(("Bytes per link per " + series, bar_plot(
            folder, rows, series,
            [("h2d_gb", "PCIe H2D"), ("d2h_gb", "PCIe D2H"), ("storage_read_gb", "storage read"),
             ("storage_write_gb", "storage write")],
            "bytes moved (GB)", "Bytes per link per " + series, "bytes_per_link")))
        if full:
            cdf = plot_ttft_cdf(folder, rows, series)
            if cdf:
                plots.append(("TTFT CDF per " + series, cdf))
    for caption, path in plots:
        svg = path[:-4] + ".svg"
        md += [f"### {caption}", "", f"![{caption}]({path}) ([SVG]({svg}))", ""]
    return md, len(plots)


def write_report(folder, title):
    axes, all_rows, rows = load(folder)
    full = any(num(r.get("latency_ms.ttft.p50")) is not None for r in rows)
    seeds = ordered(r.get("seed") for r in rows)
    failed = [r for r in all_rows if r.get("status") != "ok"]
    BUILD[0] = build_text(rows)
    md = [f"# {title}", "", f"Made by {BUILD[0]}.", "",
          f"{len(all_rows)} cells ({len(rows)} finished, {len(failed)} failed or not run); "
          f"grid axes: {', '.join(axes) if axes else '(none)'}; seeds: {', '.join(map(str, seeds))}; "
          f"mode: {'full' if full else 'hitrate'}. Rows average the seeds. The best value of each "
          "column is **bold** (highest hit ratio, lowest latency, bytes and write amplification). "
          "Bytes are GB (10^9); write amplification is bytes written per byte of KV computed "
          "(prefill tokens, recomputation included, times the model's KV bytes per token).", ""]
    count = 0
    if "traces" in axes:
        rest = [a for a in axes if a != "traces"]
        for ts in ordered(r.get("traces") for r in rows):
            SUFFIX[0] = "-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in str(ts))
            lines, n = section(folder, [r for r in rows if r.get("traces") == ts], rest, full,
                               f"Trace set {ts}")
            md += lines
            count += n
        SUFFIX[0] = ""
    else:
        lines, count = section(folder, rows, axes, full, "Results")
        md += lines
    if failed:
        md += ["## Failed cells", "", "| cell | status | error |", "|---|---|---|"]
        md += [f"| {r['cell']} | {r['status']} | {(r.get('error') or '').replace('|', '/')} |" for r in failed]
        md.append("")
    md += ["---", "", f"Cells and plots made by {BUILD[0]}.", ""]
    tmp = os.path.join(folder, "report.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md))
    os.replace(tmp, os.path.join(folder, "report.md"))
    print(f"report: {os.path.join(folder, 'report.md')} ({count} plots in {os.path.join(folder, 'plots')})")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("dir")
    p.add_argument("--title", default="")
    a = p.parse_args()
    try:
        write_report(a.dir, a.title or f"Sweep {os.path.basename(os.path.abspath(a.dir))}")
    except BadInput as e:
        print(f"kvtier report: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
