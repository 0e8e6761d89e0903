#!/usr/bin/env python3
"""Turns a kvtier sweep folder into report.md with comparison tables and figures (PNG at 300
dpi, SVG and PDF; their data in plots/figures.json), or plots one replay's timeseries.csv.

Reads DIR/results.json (one row per cell, every summary figure flattened; docs/outputs.md) and,
for the TTFT CDF, each full-mode cell's requests.csv. Cells that differ only by seed are one
configuration: tables and figures give their mean and 95% interval (report_stats.interval), a
column's best only where intervals separate it, else the tied; no figure or table averages
cells of different configurations (tools/report_figures.py). Cells that were overloaded, lagged
the clock or met L3 backpressure are named at the top with advice and marked on the figures.
--x, --series, --facet, --filter, --logx/--logy and --metric choose what the figures show, --out
where the report goes (docs/sweep.md). Exit 2 on bad input, 1 on failure.
"""
import argparse
import csv
import json
import os
import sys


DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4, "int8": 1}

# (column or derived name, heading, format, better, table): the report's tables, one per table
# name, each a column per metric.
METRICS = [
    ("hit_ratio.tokens", "hit ratio", "{:.4f}", "max", "hit ratios"),
    ("hit_ratio.by_tier.device.tokens", "device", "{:.4f}", "max", "hit ratios"),
    ("hit_ratio.by_tier.host.tokens", "host", "{:.4f}", "max", "hit ratios"),
    ("hit_ratio.by_tier.storage.tokens", "storage", "{:.4f}", "max", "hit ratios"),
    ("latency_ms.ttft.p50", "TTFT p50 (ms)", "{:.1f}", "min", "latency"),
    ("latency_ms.ttft.p99", "TTFT p99 (ms)", "{:.1f}", "min", "latency"),
    ("latency_ms.tpot.p50", "TPOT p50 (ms)", "{:.2f}", "min", "latency"),
    ("latency_ms.tpot.p99", "TPOT p99 (ms)", "{:.2f}", "min", "latency"),
    ("h2d_gb", "H2D (GB)", "{:.3f}", "min", "traffic"),
    ("d2h_gb", "D2H (GB)", "{:.3f}", "min", "traffic"),
    ("storage_read_gb", "storage read (GB)", "{:.3f}", "min", "traffic"),
    ("storage_write_gb", "storage write (GB)", "{:.3f}", "min", "traffic"),
    ("write_amp_host", "D2H / KV computed", "{:.3f}", "min", "traffic"),
    ("write_amp_storage", "storage write / KV computed", "{:.3f}", "min", "traffic"),
]
TABLES = {
    "hit ratios": "Hit ratios: the share of prompt tokens found cached, in any tier and by tier "
                  "(higher is better)",
    "latency": "Latency (lower is better)",
    "traffic": "Bytes moved per link, in GB (10^9), and write amplification: bytes written per "
               "byte of KV computed (prefill tokens, recomputation included, times the model's KV "
               "bytes per token); lower is better",
}


class BadInput(Exception):
    pass


from report_stats import (METHODS, apply_filters, by_configuration, interval,  # noqa: E402
                          kind_of, num, ordered)


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
    if computed:
        for link in ("h2d", "d2h", "storage_read", "storage_write"):
            row[link + "_kb_per_token"] = row[link + "_gb"] * gb / 1e3 / computed
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
    """One configuration's cells (they differ only by seed):
    [(values tuple, {metric: Interval}, [rows])]."""
    out = []
    for key, members in by_configuration(rows, axes).items():
        ivs = {}
        for m, *_ in METRICS:
            iv = interval((r.get(m) for r in members), kind_of(m))
            if iv is not None:
                ivs[m] = iv
        out.append((key, ivs, members))
    return out


def interval_text(iv, fmt):
    """mean, +-the interval's half width (+up/-down when it is not symmetric at this
    precision); "± 0" when every seed gave the same value."""
    mean = fmt.format(iv.mean)
    if iv.n < 2:
        return mean
    if iv.zero_width:
        return f"{mean} ± 0"
    up, down = fmt.format(iv.hi - iv.mean), fmt.format(iv.mean - iv.lo)
    return f"{mean} ± {up}" if up == down else f"{mean} +{up}/−{down}"


def standings(groups, metric, better):
    """{configuration: "best" | "tied"}: best only where its interval is clear of every other
    configuration's; the configurations whose intervals overlap the best mean's are tied. Nothing
    when every configuration ties (the column does not tell them apart)."""
    ivs = {g[0]: g[1][metric] for g in groups if metric in g[1]}
    if len(ivs) < 2:
        return {}
    pick = max if better == "max" else min
    top = pick(ivs, key=lambda k: ivs[k].mean)
    tied = [k for k, iv in ivs.items() if iv.overlaps(ivs[top])]
    if len(tied) == 1:
        return {top: "best"}
    if len(tied) == len(ivs):
        return {}
    return {k: "tied" for k in tied}


def load_text(cells):
    """A configuration's load column: which conditions shaped how many of its seeds."""
    import report_figures as rf
    flags = rf.flags_of(cells)
    names = {"arrivals": "OVERLOADED", "clock_lag": "clock lag", "l3_backpressure": "L3 backpressure"}
    return ", ".join(f"{names[k]} {flags[k]}/{len(cells)}" for k, _, _ in rf.FLAGS if flags.get(k))


def table(groups, axes, name):
    shown = [m for m in METRICS if m[4] == name and any(m[0] in g[1] for g in groups)]
    if not shown:
        return None, []
    marks = {m: standings(groups, m, better) for m, _, _, better, _ in shown}
    loads = [load_text(members) for _, _, members in groups]
    with_load = name == "latency" and any(loads)
    head = axes + [h for _, h, _, _, _ in shown] + (["load"] if with_load else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (key, ivs, members), load in zip(groups, loads):
        cells = [str(k) for k in key]
        for m, _, fmt, _, _ in shown:
            if m not in ivs:
                cells.append("")
                continue
            text = interval_text(ivs[m], fmt)
            mark = marks[m].get(key)
            cells.append(f"**{text}**" if mark == "best" else
                         f"{text} (tied)" if mark == "tied" else text)
        if with_load:
            cells.append(load)
        lines.append("| " + " | ".join(cells) + " |")
    undecided = [h for m, h, _, _, _ in shown if not marks[m]
                 and len({round(g[1][m].mean, 12) for g in groups if m in g[1]}) > 1]
    return "\n".join(lines), undecided


def tables_caption(groups):
    seeds = sorted({len(members) for _, _, members in groups})
    n = seeds[0] if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    if seeds[-1] < 2:
        return ("One cell per configuration: each figure is that replay's, exact for its "
                "workload, with no interval over workloads; **bold**: the best of a column, "
                "(tied) where several share it.")
    kinds = sorted({kind_of(m) for m, *_ in METRICS})
    return (f"Each figure: the mean over a configuration's {n} seeds (workload variants) and its "
            "95% interval, ± the half width, or +up/−down where the interval is not symmetric: "
            + "; ".join(f"{METHODS[k]} for {'ratios' if k == 'ratio' else 'figures that cannot go below 0' if k == 'positive' else 'the rest'}"
                        for k in kinds if k != "any")
            + " (the delta method), so that no interval crosses 0 or 1. \"± 0\": every seed gave "
            "the same value (the seeds did not change it). **Bold**: the best of a column, only "
            "where its interval is clear of every other configuration's; where intervals overlap "
            "the best, the configurations are (tied); a column where all are tied marks none.")


def build_text(rows):
    """The kvtier build(s) the cells name (summary.json's `kvtier`; docs/outputs.md, Provenance)."""
    builds = ordered(f"kvtier {r.get('kvtier.version') or 'unknown'} (commit "
                     f"{r.get('kvtier.commit') or 'unknown'}, {r.get('kvtier.build_type') or '?'})"
                     for r in rows)
    if len(builds) == 1:
        return builds[0]
    return "several builds: " + "; ".join(builds)


# (name, metric, y label, the question the figure answers). Bytes are kB (10^3) per token of KV
# computed (prefill tokens, recomputation included), so that traces and loads of different
# sizes compare.
FIGURES = [
    ("hit_ratio", "hit_ratio.tokens", "hit ratio (share of prompt tokens)",
     "What share of prompt tokens does the cache serve?"),
    ("ttft_p99", "latency_ms.ttft.p99", "TTFT p99 (ms)",
     "How long do the slowest 1% of requests wait for a first token?"),
    ("tpot_p99", "latency_ms.tpot.p99", "TPOT p99 (ms)",
     "How slow are the slowest 1% of output tokens?"),
    ("d2h_per_token", "d2h_kb_per_token", "PCIe D2H (kB / token computed)",
     "How many bytes go device-to-host per token computed?"),
    ("h2d_per_token", "h2d_kb_per_token", "PCIe H2D (kB / token computed)",
     "How many bytes come back host-to-device per token computed?"),
    ("storage_write_per_token", "storage_write_kb_per_token",
     "storage write (kB / token computed)", "How many bytes go to storage per token computed?"),
    ("storage_read_per_token", "storage_read_kb_per_token",
     "storage read (kB / token computed)",
     "How many bytes come back from storage per token computed?"),
]


def metric_units(folder):
    """{metric: unit} from results_long.csv (written by kvtier sweep --collect), if there."""
    units = {}
    try:
        with open(os.path.join(folder, "results_long.csv")) as f:
            for rec in csv.DictReader(f):
                units.setdefault(rec["metric"], rec["unit"])
    except (OSError, KeyError):
        pass
    return units


def chosen_figures(folder, opts):
    """The default figures, or one per --metric, named metric-COLUMN (never a default figure's
    name, which a --metric report must not overwrite)."""
    if not opts.metric:
        return FIGURES
    units = metric_units(folder)
    known = {f[1]: f for f in FIGURES}
    out = []
    for m in opts.metric:
        f = known.get(m)
        label = f[2] if f else (f"{m} ({units[m]})" if m in units else m)
        question = f[3] if f else f"{m} by configuration"
        out.append(("metric-" + m.replace(".", "_"), m, label, question))
    return out


def layout_caption(layout, rows, notes=None, at=None):
    import report_figures as rf
    parts = []
    if layout.x:
        parts.append(f"x: {rf.axis_label(layout.x)} (`{layout.x}`)")
    if layout.series:
        parts.append(f"one line per {rf.axis_label(layout.series)} (`{layout.series}`)")
    if layout.facet:
        parts.append(f"a panel per {rf.axis_label(layout.facet)}")
    if layout.rows:
        parts.append("panel rows: " + ", ".join(f"`{a}`" for a in layout.rows))
    if layout.constants:
        parts.append("fixed: " + ", ".join(f"`{k}` = {v}" for k, v in layout.constants.items()))
    if at:
        parts.append("at " + ", ".join(f"`{k}` = {v}" for k, v in at.items()))
    text = "; ".join(parts)
    if not notes:
        return text
    more = []
    seeds = notes.get("seeds", 1)
    if seeds > 1:
        more.append(f"points: the mean of a configuration's {seeds} seeds; band: its 95% interval "
                    f"({METHODS[notes['interval']]}, the delta method)")
        if notes.get("zero_width"):
            more.append(f"{notes['zero_width']} of {notes['points']} points have no band: every "
                        "seed gave the same value (a zero-width interval)")
    else:
        more.append("one cell per configuration (no interval)")
    if notes.get("per_trace_y"):
        more.append("each trace set has its own y axis (their scales differ)")
    if notes.get("log_y"):
        more.append("log y: the values span more than a decade")
    if notes.get("zeros_on_axis"):
        more.append("zeros are drawn on the x axis (hollow triangles), below the log scale")
    for name in notes.get("merged", []):
        more.append(f"one line for {name} (the same values)")
    import report_figures as rf2
    for key, marker, label in rf2.FLAGS:
        n = notes.get("marks", {}).get(key)
        if n:
            shape = {"s": "square", "D": "diamond", "h": "hexagon"}[marker]
            more.append(f"{n} of {notes['points']} points marked with a black {shape}: {label} "
                        "(a panel where all are is hatched)")
    return text + ". " + "; ".join(more)


def figures(folder, out, rows, axes, full, opts):
    """Draws the figures into OUT/plots; returns [(question, caption, png path)] and their data
    for figures.json."""
    import report_figures as rf
    for a in (opts.x, opts.series, opts.facet):
        if a and a not in axes:
            raise BadInput(f"{a}: not a grid axis of this sweep ({', '.join(axes) or 'none'})")
    layout = rf.make_layout(rows, axes, opts.x, opts.series, opts.facet)
    shown, data = [], {}
    for name, metric, ylabel, question in chosen_figures(folder, opts):
        if layout.x and name == "hit_ratio":
            name = "hit_ratio_vs_capacity" if layout.x.endswith(("_tokens", "_blocks")) \
                else "hit_ratio_vs_" + layout.x.split(".")[-1]
        q = question
        if layout.x and not opts.metric:
            q = question[:-1] + f", by {rf.axis_label(layout.x).split(' (')[0]}?"
        fig, d, notes = rf.line_figure(rows, axes, layout, metric, ylabel, q, opts.logx,
                                       opts.logy)
        if fig is None or not any(p["lines"] for p in d["panels"]):
            if fig is not None:
                rf.plt.close(fig)
            continue
        shown.append((q, layout_caption(layout, rows, notes), rf.save(fig, out, name, BUILD[0])))
        data[name] = d
    if full and not opts.metric:
        question = "How are first-token times distributed?"
        fig, d = rf.cdf_figure(folder, rows, axes, layout, question)
        if fig is not None:
            question = d["question"]
            caption = "One curve per cell (" + layout_caption(layout, rows, None, d["at"]) + ")"
            for name in d["notes"]["merged"]:
                caption += f"; one set of curves for {name} (the same replays)"
            marks = d["notes"]["marks"]
            if marks:
                caption += ("; hatched panels: every cell in them " + ", ".join(
                    t for k, _, t in rf.FLAGS if marks.get(k)))
            shown.append((question, caption, rf.save(fig, out, "ttft_cdf", BUILD[0])))
            data["ttft_cdf"] = d
    return shown, data


BUILD = [""]  # the kvtier build that made the cells, in every figure's metadata


def remove_stale_plots(out):
    """The figures an earlier report in OUT wrote (its plots/figures.json) go before this one
    writes, so that plots/ holds only what report.md shows."""
    listing = os.path.join(out, "plots", "figures.json")
    try:
        with open(listing) as f:
            names = list(json.load(f))
    except (OSError, ValueError):
        return
    for name in names:
        for ext in ("png", "svg", "pdf"):
            path = os.path.join(out, "plots", f"{name}.{ext}")
            if os.path.exists(path):
                os.remove(path)
    os.remove(listing)


def warnings_section(rows):
    """What shaped some cells' figures besides the cache, each cause with its advice (summary.json's
    load.cause and load.advice; docs/outputs.md)."""
    import report_figures as rf
    flagged = {}
    for r in rows:
        for key in rf.flags_of([r]):
            flagged.setdefault(key, []).append(r)
    if not flagged:
        return []
    heads = {"arrivals": "OVERLOADED",
             "clock_lag": "lagged the wall clock (CLOCK LAG)",
             "l3_backpressure": "met L3 BACKPRESSURE"}
    causes = {"arrivals": "arrivals outpaced the instance",
              "clock_lag": "the machine did not keep up with the wall clock",
              "l3_backpressure": "the storage backend did not keep up: transfers waited for room "
                                 "among the bytes in flight to it"}
    md = ["## Warnings", ""]
    for key, _, _ in rf.FLAGS:
        cells = flagged.get(key)
        if not cells:
            continue
        overloaded = sum(1 for r in cells if r.get("load.overloaded") in (True, "true"))
        advice = ordered(r.get("load.advice") for r in cells if r.get("load.advice"))
        text = f"**{len(cells)} of {len(rows)} cells {heads[key]}**"
        if overloaded:
            text += (f"{'' if key == 'arrivals' else f' ({overloaded} of them overloaded)'}: "
                     "the queue grew through the run, so their latency, and even hit ratios, "
                     "measure queueing rather than caching")
        text += f". Cause: {causes[key]}."
        if advice:
            text += " What to change: " + "; or ".join(advice) + "."
        waits = [[float(w) for w in str(r.get("load.queue_wait_s_by_quarter")).split(" | ")]
                 for r in cells if r.get("load.queue_wait_s_by_quarter")]
        if overloaded and waits:
            first, last = [w[0] for w in waits], [w[-1] for w in waits]
            text += (f" The median queue wait grew from {min(first):.1f}-{max(first):.1f} s in "
                     f"the first quarter of arrivals to {min(last):.1f}-{max(last):.1f} s in the "
                     "last.")
        md += [text, ""]
    md += ["Flagged points are marked on every figure, and panels where all are flagged are "
           "hatched; the latency table's `load` column counts them per configuration.", ""]
    return md


def write_report(folder, out, title, opts):
    axes, all_rows, rows = load(folder)
    rows = apply_filters(rows, opts.filter)
    if not rows:
        raise BadInput("no finished cell passes --filter " +
                       " ".join(f"{k}={v}" for k, v in opts.filter))
    full = any(num(r.get("latency_ms.ttft.p50")) is not None for r in rows)
    seeds = ordered(r.get("seed") for r in rows)
    failed = [r for r in all_rows if r.get("status") != "ok"]
    BUILD[0] = build_text(rows)
    os.makedirs(out, exist_ok=True)
    remove_stale_plots(out)
    md = [f"# {title}", "", f"Made by {BUILD[0]}.", "",
          f"{len(all_rows)} cells ({len(rows)} finished and shown, {len(failed)} failed or not "
          f"run); grid axes: {', '.join(axes) if axes else '(none)'}; seeds: "
          f"{', '.join(map(str, seeds))}; mode: {'full' if full else 'hitrate'}.", ""]
    md += warnings_section(rows)
    shown, data = figures(folder, out, rows, axes, full, opts)
    rel = os.path.relpath(out, folder)
    if shown:
        md += ["## Figures", ""]
    for question, caption, path in shown:
        stem = path[:-4]
        md += [f"![{question}]({path})", "", f"**{question}** {caption}. ([SVG]({stem}.svg), "
               f"[PDF]({stem}.pdf))", ""]
    if shown:
        tmp = os.path.join(out, "plots", "figures.json.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(out, "plots", "figures.json"))
    sets = ordered(r.get("traces") for r in rows) if "traces" in axes else [None]
    rest = [a for a in axes if a != "traces"]
    caption_done = False
    for ts in sets:
        sel = [r for r in rows if ts is None or r.get("traces") == ts]
        groups = group(sel, rest)
        md += [f"## Trace set {ts}" if ts is not None else "## Results", ""]
        if not caption_done:
            md += [tables_caption(groups), ""]
            caption_done = True
        for name, heading in TABLES.items():
            text, undecided = table(groups, rest, name)
            if text is None:
                continue
            md += [f"{heading}" + (f". No configuration stands out in: {', '.join(undecided)}"
                                   if undecided else "") + ".", "", text, ""]
    if failed:
        md += ["## Failed cells", "", "| cell | status | error |", "|---|---|---|"]
        md += [f"| {r['cell']} | {r['status']} | {(r.get('error') or '').replace('|', '/')} |"
               for r in failed]
        md.append("")
    md += ["---", "", f"Cells and figures made by {BUILD[0]}" + (
        f" from the sweep in {os.path.relpath(folder, out)}" if rel != "." else "") + ".", ""]
    tmp = os.path.join(out, "report.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md))
    os.replace(tmp, os.path.join(out, "report.md"))
    print(f"report: {os.path.join(out, 'report.md')} ({len(shown)} figures in "
          f"{os.path.join(out, 'plots')})")


def key_value(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text}: expected KEY=VALUE")
    k, v = text.split("=", 1)
    return k, v


def scale(text):
    k, v = key_value(text)
    if k not in ("x", "y") or v not in ("log", "linear"):
        raise argparse.ArgumentTypeError(f"{text}: expected x=log, x=linear, y=log or y=linear")
    return k, v


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--title", default="")
    p.add_argument("--x", help="the grid axis along x (default: a capacity axis)")
    p.add_argument("--series", help="one line per value of this axis (default: a *policy* axis)")
    p.add_argument("--facet", help="a panel per value of this axis (default: traces)")
    p.add_argument("--filter", action="append", default=[], type=key_value,
                   metavar="KEY=VALUE", help="only cells with this value (repeatable)")
    p.add_argument("--metric", action="append", default=[],
                   help="a results column to plot instead of the default figures (repeatable)")
    p.add_argument("--logx", action="store_const", const=True, default=None)
    p.add_argument("--logy", action="store_const", const=True, default=None)
    p.add_argument("--scale", action="append", default=[], type=scale,
                   help="x=log|linear, y=log|linear (default: log where values span decades)")
    p.add_argument("--timeseries", action="store_true",
                   help="DIR is one replay's folder: plot its timeseries.csv")
    p.add_argument("--interval", type=float, default=0,
                   help="--timeseries: seconds per point (default: a round number that gives "
                        "about 200 points over the run)")
    p.add_argument("--out", default="",
                   help="write report.md and plots/ here (default: DIR itself)")
    a = p.parse_args(argv)
    for k, v in a.scale:
        setattr(a, "log" + k, v == "log")
    return a


def main():
    a = parse_args()
    import report_timeseries
    try:
        if a.interval < 0:
            raise BadInput(f"--interval {a.interval:g}: seconds above 0")
        if a.timeseries:
            report_timeseries.plot(a.dir, a.out or a.dir, a.title, a.interval)
        else:
            write_report(a.dir, a.out or a.dir,
                         a.title or f"Sweep {os.path.basename(os.path.abspath(a.dir))}", a)
    except (BadInput, report_timeseries.BadSeries) as e:
        print(f"kvtier report: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
