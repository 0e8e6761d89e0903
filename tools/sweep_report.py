#!/usr/bin/env python3
"""Turns a kvtier sweep folder into report.md with comparison tables and figures (PNG at 300
dpi, SVG and PDF; their data in plots/figures.json), or plots one replay's timeseries.csv.

Reads DIR/results.json (one row per cell, every summary figure flattened; docs/outputs.md) and,
for the TTFT CDF, each full-mode cell's requests.csv. Cells that differ only by seed are one
configuration: tables and figures give their mean, figures with a 95% t-interval; no figure or
table averages cells of different configurations (tools/report_figures.py). --x, --series,
--facet, --filter, --logx/--logy and --metric choose what the figures show (docs/sweep.md).
Exit 2 on bad input, 1 on failure.
"""
import argparse
import csv
import json
import os
import sys


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


from report_stats import apply_filters, by_configuration, mean_ci, num, ordered  # noqa: E402


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
    """One configuration's cells (they differ only by seed), averaged:
    [(values tuple, {metric: mean}, [rows])]."""
    out = []
    for key, members in by_configuration(rows, axes).items():
        means = {}
        for m, *_ in METRICS:
            mean, _, _ = mean_ci(r.get(m) for r in members)
            if mean is not None:
                means[m] = mean
        out.append((key, means, members))
    return out


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


def build_text(rows):
    """The kvtier build(s) the cells name (summary.json's `kvtier`; docs/outputs.md, Provenance)."""
    builds = ordered(f"kvtier {r.get('kvtier.version') or 'unknown'} (commit "
                     f"{r.get('kvtier.commit') or 'unknown'}, {r.get('kvtier.build_type') or '?'})"
                     for r in rows)
    if len(builds) == 1:
        return builds[0]
    return "several builds: " + "; ".join(builds)


# (name, metric, y label, message of the figure). Bytes are kB (10^3) per token of KV computed
# (prefill tokens, recomputation included), so that traces and loads of different sizes compare.
FIGURES = [
    ("hit_ratio", "hit_ratio.tokens", "hit ratio (fraction of prompt tokens)",
     "Share of prompt tokens found in any tier"),
    ("ttft_p99", "latency_ms.ttft.p99", "TTFT p99 (ms)", "Time to first token, 99th percentile"),
    ("tpot_p99", "latency_ms.tpot.p99", "TPOT p99 (ms)",
     "Time per output token, 99th percentile"),
    ("d2h_per_token", "d2h_kb_per_token", "PCIe D2H (kB / token computed)",
     "PCIe device-to-host bytes per token computed"),
    ("h2d_per_token", "h2d_kb_per_token", "PCIe H2D (kB / token computed)",
     "PCIe host-to-device bytes per token computed"),
    ("storage_write_per_token", "storage_write_kb_per_token",
     "storage write (kB / token computed)", "Bytes written to storage per token computed"),
    ("storage_read_per_token", "storage_read_kb_per_token",
     "storage read (kB / token computed)", "Bytes read from storage per token computed"),
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
    if not opts.metric:
        return FIGURES
    units = metric_units(folder)
    known = {f[1]: f for f in FIGURES}
    return [known.get(m) or (m.replace(".", "_"), m,
                             f"{m} ({units[m]})" if m in units else m, m)
            for m in opts.metric]


def layout_caption(layout, rows, at=None):
    parts = []
    if layout.x:
        parts.append(f"x: {layout.x}")
    if layout.series:
        parts.append(f"one line per {layout.series}")
    if layout.facet:
        parts.append(f"a panel per {layout.facet}")
    if layout.rows:
        parts.append("panel rows: " + ", ".join(layout.rows))
    if layout.constants:
        parts.append("fixed: " + ", ".join(f"{k} = {v}" for k, v in layout.constants.items()))
    if at:
        parts.append("at " + ", ".join(f"{k} = {v}" for k, v in at.items()))
    seeds = max(len(c) for c in by_configuration(rows, [a for a in layout.assigned()]).values())
    parts.append("points: mean of a configuration's seeds, band: 95% t-interval" if seeds > 1
                 else "one seed per configuration (no interval)")
    return "; ".join(parts)


def figures(folder, rows, axes, full, opts):
    """Draws the figures; returns [(message, caption, png path)] and their data for
    figures.json."""
    import report_figures as rf
    for a in (opts.x, opts.series, opts.facet):
        if a and a not in axes:
            raise BadInput(f"{a}: not a grid axis of this sweep ({', '.join(axes) or 'none'})")
    layout = rf.make_layout(rows, axes, opts.x, opts.series, opts.facet)
    out, data = [], {}
    for name, metric, ylabel, message in chosen_figures(folder, opts):
        if layout.x and name == "hit_ratio":
            name = "hit_ratio_vs_capacity" if layout.x.endswith(("_tokens", "_blocks")) \
                else "hit_ratio_vs_" + layout.x.split(".")[-1]
        fig, d = rf.line_figure(rows, axes, layout, metric, ylabel, opts.logx, opts.logy)
        if fig is None or not any(p["lines"] for p in d["panels"]):
            if fig is not None:
                rf.plt.close(fig)
            continue
        out.append((message, f"{message} ({layout_caption(layout, rows)})",
                    rf.save(fig, folder, name, BUILD[0])))
        data[name] = d
    if full and not opts.metric:
        fig, d = rf.cdf_figure(folder, rows, axes, layout)
        if fig is not None:
            out.append(("TTFT distribution", "TTFT distribution, one curve per cell "
                        f"({layout_caption(layout, rows, d['at'])})",
                        rf.save(fig, folder, "ttft_cdf", BUILD[0])))
            data["ttft_cdf"] = d
    return out, data


BUILD = [""]  # the kvtier build that made the cells, in every figure's metadata


def write_report(folder, title, opts):
    axes, all_rows, rows = load(folder)
    rows = apply_filters(rows, opts.filter)
    if not rows:
        raise BadInput("no finished cell passes --filter " +
                       " ".join(f"{k}={v}" for k, v in opts.filter))
    full = any(num(r.get("latency_ms.ttft.p50")) is not None for r in rows)
    seeds = ordered(r.get("seed") for r in rows)
    failed = [r for r in all_rows if r.get("status") != "ok"]
    BUILD[0] = build_text(rows)
    md = [f"# {title}", "", f"Made by {BUILD[0]}.", "",
          f"{len(all_rows)} cells ({len(rows)} finished and shown, {len(failed)} failed or not "
          f"run); grid axes: {', '.join(axes) if axes else '(none)'}; seeds: "
          f"{', '.join(map(str, seeds))}; mode: {'full' if full else 'hitrate'}. Table rows are "
          "configurations, their seeds averaged. The best value of each column is **bold** "
          "(highest hit ratio, lowest latency, bytes and write amplification). Bytes are GB "
          "(10^9); write amplification is bytes written per byte of KV computed (prefill "
          "tokens, recomputation included, times the model's KV bytes per token).", ""]
    shown, data = figures(folder, rows, axes, full, opts)
    if shown:
        md += ["## Figures", ""]
    for message, caption, path in shown:
        stem = path[:-4]
        md += [f"![{message}]({path})", "",
               f"{caption}. ([SVG]({stem}.svg), [PDF]({stem}.pdf))", ""]
    tmp = os.path.join(folder, "plots", "figures.json.tmp")
    if shown:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(folder, "plots", "figures.json"))
    if "traces" in axes:
        rest = [a for a in axes if a != "traces"]
        for ts in ordered(r.get("traces") for r in rows):
            sel = [r for r in rows if r.get("traces") == ts]
            md += [f"## Trace set {ts}", "", table(group(sel, rest), rest), ""]
    else:
        md += ["## Results", "", table(group(rows, axes), axes), ""]
    if failed:
        md += ["## Failed cells", "", "| cell | status | error |", "|---|---|---|"]
        md += [f"| {r['cell']} | {r['status']} | {(r.get('error') or '').replace('|', '/')} |"
               for r in failed]
        md.append("")
    md += ["---", "", f"Cells and figures made by {BUILD[0]}.", ""]
    tmp = os.path.join(folder, "report.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md))
    os.replace(tmp, os.path.join(folder, "report.md"))
    print(f"report: {os.path.join(folder, 'report.md')} ({len(shown)} figures in "
          f"{os.path.join(folder, 'plots')})")


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
    a = p.parse_args(argv)
    for k, v in a.scale:
        setattr(a, "log" + k, v == "log")
    return a


def main():
    a = parse_args()
    import report_timeseries
    try:
        if a.timeseries:
            report_timeseries.plot(a.dir, a.title)
        else:
            write_report(a.dir, a.title or f"Sweep {os.path.basename(os.path.abspath(a.dir))}", a)
    except (BadInput, report_timeseries.BadSeries) as e:
        print(f"kvtier report: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
