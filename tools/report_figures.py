"""The figures of kvtier's sweep reports (tools/sweep_report.py; docs/sweep.md, "Reports").

Every figure has one metric and answers one question, named in its title. Its layout comes
from the grid: an x axis (numeric), panel columns (the facet: the trace set by default), panel
rows (the axes left over) and one line per value of the series axis, so that each line is one
configuration and each point the mean of that configuration's cells, which differ only by seed,
with a 95% interval band that cannot cross the figure's bounds (report_stats.interval). Nothing
is averaged over a categorical axis: a point that would gather cells of two configurations is an
error. Panels of one trace set share a y axis; trace sets whose scales differ get one each. A y
axis is logarithmic where its values span more than a decade, zeros drawn on the axis. Points
whose runs were overloaded, lagged the clock or met L3 backpressure are marked, and a panel
where every point was is hatched. Colours are Okabe and Ito's colour-blind-safe palette, each
series with its own marker and dash. Each figure is written as PNG (300 dpi), SVG and PDF
(TrueType fonts), and its data to plots/figures.json.
"""
import csv
import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from report_stats import (by_configuration, interval, is_numeric_axis, kind_of,  # noqa: E402
                          num, ordered, short_number, sort_key)

DPI = 300
PANEL_W, PANEL_H = 2.3, 1.75  # inches: three panels fill a 7 in text width
COLUMN_W = 3.3                # one panel: a single column
plt.rcParams.update({"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8,
                     "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
                     "figure.titlesize": 8, "lines.linewidth": 1.2, "lines.markersize": 3.5,
                     "svg.fonttype": "none", "pdf.fonttype": 42, "ps.fonttype": 42})
# Okabe & Ito (2008), "Color Universal Design": told apart with any colour vision; black is kept
# for the marks of overloaded points.
COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
          "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
LINESTYLES = ["-", "--", "-.", ":"]

# Load conditions that shape a run's figures besides the cache (summary.json's load.*):
# (key, cause when overloaded, mark, legend text).
FLAGS = [
    ("arrivals", "s", "overloaded: arrivals outpaced the instance"),
    ("clock_lag", "D", "clock lag: the machine lagged the wall clock"),
    ("l3_backpressure", "h", "L3 backpressure: storage did not keep up"),
]

# Human names of axes and values (the grid's own labels stay in tables and --filter).
AXIS_NAMES = {
    "cache.host_tokens": "host tier capacity (tokens)",
    "cache.device_tokens": "device tier capacity (tokens)",
    "storage.capacity_tokens": "storage capacity (tokens)",
    "trace.time_scale": "trace time scale (x recorded times)",
    "write_policy": "write policy",
    "cache.write_policy": "write policy",
    "cache.storage_write": "storage writes",
    "traces": "trace",
    "scheduler.preemption": "preemption",
    "storage.prefetch_policy": "prefetch policy",
}
VALUE_NAMES = {
    "write_through": "write-through",
    "write_through_selective": "selective write-through",
    "write_back": "write-back",
    "write_back:keep": "write-back, host copy kept",
    "on_host_evict": "on host eviction",
    "conversation": "Mooncake conversation",
    "agentic": "agentic sessions",
    "sample": "bundled sample",
    "save_to_storage": "save to storage",
    "swap_to_host": "swap to host",
    "wait_complete": "wait to complete",
}


class Layout:
    """Which grid axis plays which part in a figure."""

    def __init__(self, x, series, facet, rows, constants):
        self.x, self.series, self.facet = x, series, facet
        self.rows, self.constants = rows, constants

    def assigned(self):
        return [a for a in [self.x, self.series, self.facet] + self.rows if a]


def axis_label(axis):
    if axis in AXIS_NAMES:
        return AXIS_NAMES[axis]
    name = axis.split(".")[-1].replace("_", " ")
    if axis.endswith("_tokens"):
        return f"{name[:-7]} (tokens)"
    if axis.endswith("_blocks"):
        return f"{name[:-7]} (blocks)"
    return name


def value_text(axis, v):
    x = num(v)
    if x is not None and (axis.endswith("_tokens") or axis.endswith("_blocks")):
        return short_number(x)
    text = str(v)
    if text in VALUE_NAMES:
        return VALUE_NAMES[text]
    if text.startswith("selective:"):  # write_through_selective: a block copied at its N-th use
        uses = text.split(":", 1)[1]
        return f"selective ({uses} use{'' if uses == '1' else 's'})"
    return text.replace("_", " ") if x is None else text


def make_layout(rows, axes, x=None, series=None, facet=None):
    """x: the asked axis, else a capacity axis, else a numeric one; facet: the trace set; series:
    a *policy* axis; the other axes with more than one value are panel rows."""
    varying = [a for a in axes if len(ordered(r.get(a) for r in rows)) > 1]
    constants = {a: rows[0].get(a) for a in axes if a not in varying and rows}
    numeric = [a for a in varying if is_numeric_axis(rows, a)]
    if x is not None and x not in numeric:
        # A categorical x: its values lie along x, a point per configuration (no lines).
        series, x = x, None
        rest = [a for a in varying if a not in (series, facet)]
        return Layout(None, series if series in varying else None,
                      facet if facet in varying else None, rest, constants)
    if x is None:
        cap = [a for a in numeric if a.endswith("_tokens") or a.endswith("_blocks")]
        x = (cap or numeric or [None])[0]
    if facet is None and "traces" in varying and x != "traces":
        facet = "traces"
    rest = [a for a in varying if a not in (x, facet)]
    if series is None:
        pol = [a for a in rest if "policy" in a]
        series = (pol or rest or [None])[0]
    return Layout(x if x in varying else None, series if series in varying else None,
                  facet if facet in varying else None,
                  [a for a in rest if a != series], constants)


def axis_values(rows, axis):
    """An axis' values: numbers in order, other values in the grid's order."""
    values = ordered(r.get(axis) for r in rows)
    return sorted(values, key=sort_key) if all(num(v) is not None for v in values) else values


def panel_grid(rows, layout):
    """[(row key, col key)] of the panels, rows and columns each in sorted order."""
    row_keys = [()]
    for a in layout.rows:
        row_keys = [k + (v,) for k in row_keys for v in axis_values(rows, a)]
    present = {tuple(r.get(a) for a in layout.rows) for r in rows}
    row_keys = [k for k in row_keys if k in present]
    col_keys = axis_values(rows, layout.facet) if layout.facet else [None]
    return row_keys, col_keys


def panel_title(layout, row_key, col_key):
    parts = []
    if layout.facet:
        parts.append(value_text(layout.facet, col_key) if layout.facet == "traces" else
                     f"{axis_label(layout.facet)}: {value_text(layout.facet, col_key)}")
    parts += [f"{axis_label(a)}: {value_text(a, v)}" for a, v in zip(layout.rows, row_key)]
    return "\n".join(parts)


def flags_of(cells):
    """The load conditions of a configuration's cells: {flag: cells flagged}."""
    out = {}
    for r in cells:
        truthy = lambda k: r.get(k) in (True, "true", 1, "1")
        if truthy("load.overloaded"):
            cause = r.get("load.cause") or "arrivals"
            out[cause if cause in ("clock_lag", "l3_backpressure") else "arrivals"] = \
                out.get(cause if cause in ("clock_lag", "l3_backpressure") else "arrivals", 0) + 1
        elif truthy("load.clock_lag"):
            out["clock_lag"] = out.get("clock_lag", 0) + 1
        elif truthy("load.l3_backpressure"):
            out["l3_backpressure"] = out.get("l3_backpressure", 0) + 1
    return out


def line_points(rows, layout, axes, metric):
    """{x value: (Interval, cell ids, flags)}: each x one configuration's cells, never several."""
    points = {}
    kind = kind_of(metric)
    for cfg, cells in by_configuration(rows, axes).items():
        xv = cells[0].get(layout.x) if layout.x else None
        if xv in points:
            raise AssertionError(f"{metric}: two configurations at one point ({cfg})")
        iv = interval((r.get(metric) for r in cells), kind)
        if iv is not None:
            points[xv] = (iv, [r["cell"] for r in cells], flags_of(cells))
    return points


def style(i):
    """Colour, marker and dash all change with the series, so that lines which coincide stay
    visible (hollow markers of shrinking size) and a grey print tells them apart."""
    return dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)], markerfacecolor="none",
                markersize=max(2.5, 6.0 - 0.6 * i))


def spans_decade(values):
    """More than a decade between the smallest positive value and the largest."""
    pos = [v for v in values if v is not None and v > 0]
    return bool(pos) and max(pos) / min(pos) > 10


def figure_size(nrows, ncols):
    if nrows == 1 and ncols == 1:
        return COLUMN_W, 2.6
    return min(7.2, PANEL_W * ncols + 0.7), PANEL_H * nrows + 1.0


def series_points(rows, layout, axes, metric, series_values, panels):
    """{(panel index, series index): points} for every panel and series."""
    out = {}
    for p, (_, rk, ck) in enumerate(panels):
        sel = [r for r in rows if tuple(r.get(a) for a in layout.rows) == rk
               and (layout.facet is None or r.get(layout.facet) == ck)]
        for i, s in enumerate(series_values):
            mine = [r for r in sel if layout.series is None or r.get(layout.series) == s]
            pts = line_points(mine, layout, axes, metric)
            if pts:
                out[(p, i)] = pts
    return out


def duplicate_series(points, series_values, npanels):
    """{series index: the earlier series it repeats in every panel}: two labels for one line
    (selective write-through at use 1 is write-through), drawn once under both names."""
    same = {}
    key = lambda pts: sorted((sort_key(x), round(v[0].mean, 12)) for x, v in pts.items())
    for j in range(len(series_values)):
        for i in range(j):
            if i in same:
                continue
            if all(key(points.get((p, i), {})) == key(points.get((p, j), {}))
                   for p in range(npanels)) and any((p, j) in points for p in range(npanels)):
                same[j] = i
                break
    return same


def draw_flags(ax, xs, ys, flags, factor, marks):
    """Black marks around the points a load condition shaped; returns the flags drawn."""
    seen = set()
    for x, y, f in zip(xs, ys, flags):
        for key, marker, _ in FLAGS:
            if f.get(key):
                # Clipped: a zero on a log axis lies nowhere (its triangle marks it instead).
                ax.plot([x], [y * factor], linestyle="none", marker=marker, markersize=8,
                        markerfacecolor="none", markeredgecolor="black", markeredgewidth=0.7,
                        zorder=4)
                seen.add(key)
                marks[key] = marks.get(key, 0) + 1
    return seen


def hatch_panel(ax):
    ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False, hatch="////",
                           edgecolor="0.82", linewidth=0, zorder=0))


def draw_line_panel(ax, pts_by_series, series_values, labels, layout, factor, record, marks):
    drew = []
    for i, s in enumerate(series_values):
        pts = pts_by_series.get(i)
        if not pts or labels[i] is None:
            continue
        xs = sorted(pts, key=sort_key)
        xnum = [num(x) for x in xs]
        ivs = [pts[x][0] for x in xs]
        ys = [iv.mean for iv in ivs]
        label = labels[i]
        ax.plot(xnum, [y * factor for y in ys], label=label, **style(i))
        if any(iv.n > 1 and not iv.zero_width for iv in ivs):
            # Several series' bands stack: a lighter fill each, and the band's edges drawn thin in
            # its colour, keep every band readable where others overlap it.
            fill = max(0.06, min(0.2, 0.4 / max(1, len(series_values))))
            lo = [iv.lo * factor for iv in ivs]
            hi = [iv.hi * factor for iv in ivs]
            ax.fill_between(xnum, lo, hi, color=style(i)["color"], alpha=fill, linewidth=0)
            for edge in (lo, hi):
                ax.plot(xnum, edge, color=style(i)["color"], linewidth=0.5, alpha=0.6)
        draw_flags(ax, xnum, ys, [pts[x][2] for x in xs], factor, marks)
        drew.append(label)
        record.append({"label": label, "color": style(i)["color"], "x": xnum, "y": ys,
                       "ci95": [[iv.lo, iv.hi] for iv in ivs],
                       "zero_width": [iv.zero_width for iv in ivs],
                       "seeds": [iv.n for iv in ivs], "cells": [pts[x][1] for x in xs],
                       "flags": [pts[x][2] for x in xs]})
    return drew


def draw_points_panel(ax, rows, layout, axes, metric, record, factor, marks):
    """No numeric x: the series' values along x, one point (and interval) per configuration."""
    cats = axis_values(rows, layout.series) if layout.series else [None]
    drew = []
    pts = line_points(rows, Layout(layout.series, None, None, [], {}), axes, metric)
    for i, c in enumerate(cats):
        if c not in pts:
            continue
        iv, cells, flags = pts[c]
        err = None
        if iv.n > 1 and not iv.zero_width:
            err = [[(iv.mean - iv.lo) * factor], [(iv.hi - iv.mean) * factor]]
        ax.errorbar([i], [iv.mean * factor], yerr=err, capsize=2, **style(i))
        draw_flags(ax, [i], [iv.mean], [flags], factor, marks)
        drew.append(value_text(layout.series or "", c))
        record.append({"label": str(c), "color": style(i)["color"], "x": [i], "y": [iv.mean],
                       "ci95": [[iv.lo, iv.hi]],
                       "zero_width": [iv.zero_width], "seeds": [iv.n], "cells": [cells],
                       "flags": [flags]})
    ax.set_xlim(-0.5, len(cats) - 0.5)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([value_text(layout.series or "", c) for c in cats], rotation=30,
                       ha="right")
    return drew


def set_x_axis(ax, layout, rows, logx):
    xs = sorted({num(r.get(layout.x)) for r in rows})
    if logx if logx is not None else spans_decade(xs) and min(xs) > 0:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    if len(xs) <= 6:
        ax.set_xticks(xs)
        ax.set_xticklabels([value_text(layout.x, x) for x in xs])


def panel_figure(rows, layout, sharey):
    """The figure and its panels [(axes, row key, facet key)]: a grid of panel rows by facet
    columns, or, without a facet, the panel rows wrapped three to a line."""
    row_keys, col_keys = panel_grid(rows, layout)
    if layout.facet is None and len(row_keys) > 1:
        ncols = min(3, len(row_keys))
        nrows = math.ceil(len(row_keys) / ncols)
        places = [(k // ncols, k % ncols, rk, None) for k, rk in enumerate(row_keys)]
    else:
        nrows, ncols = len(row_keys), len(col_keys)
        places = [(i, j, rk, ck) for i, rk in enumerate(row_keys) for j, ck in enumerate(col_keys)]
    fig, axs = plt.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=sharey,
                            figsize=figure_size(nrows, ncols), constrained_layout=True)
    used = {(i, j) for i, j, _, _ in places}
    for i in range(nrows):
        for j in range(ncols):
            if (i, j) not in used:
                axs[i][j].set_axis_off()  # past the last panel of a wrapped grid
    return fig, axs, [(axs[i][j], rk, ck) for i, j, rk, ck in places], used


def label_axes(fig, axs, used, xlabel, ylabel):
    """x labels under the lowest panel of each column; the y label once, beside the rows."""
    nrows, ncols = len(axs), len(axs[0])
    if nrows > 1:
        fig.supylabel(ylabel, fontsize=plt.rcParams["axes.labelsize"])
        ylabel = None
    for j in range(ncols):
        lowest = max((i for i in range(nrows) if (i, j) in used), default=None)
        if lowest is not None:
            axs[lowest][j].set_xlabel(xlabel)
            axs[lowest][j].tick_params(labelbottom=True)
    for i in range(nrows):
        if (i, 0) in used and ylabel:
            axs[i][0].set_ylabel(ylabel)


def column_ranges(points, panels, layout):
    """{facet value: (smallest positive, largest) mean} over the panels of each column."""
    out = {}
    for (p, _), pts in points.items():
        ck = panels[p][2]
        vals = [v[0].mean for v in pts.values()]
        lo, hi = out.get(ck, (math.inf, 0.0))
        pos = [v for v in vals if v > 0]
        out[ck] = (min([lo] + pos), max([hi] + vals))
    return out


def independent_y(ranges):
    """Trace sets whose scales differ (largest values more than 3x apart) get a y axis each."""
    tops = [hi for _, hi in ranges.values() if hi > 0]
    return len(tops) > 1 and max(tops) / min(tops) > 3


def scale_y(ax, values, highs, kind, logy, zeros_note):
    """Log where the panel's values span more than a decade (zeros drawn on the axis), else
    linear from zero (a line's height reads as its size); ratios stay within [0, 1]."""
    pos = [v for v in values if v > 0]
    log = logy if logy is not None else kind != "ratio" and spans_decade(values)
    if log and pos:
        ax.set_yscale("log")
        floor = 10 ** math.floor(math.log10(min(pos) / 1.5))
        top = max(highs + pos) * 1.5
        ax.set_ylim(floor, top)
        if any(v <= 0 for v in values):
            zeros_note.append(True)
        return floor
    top = max(max(highs, default=0) * 1.08, 1e-9)
    if kind == "ratio":
        top = min(max(top, 0.05), 1.0)
    ax.set_ylim(0, top)
    return None


def draw_zeros(ax, record, floor, factor):
    """Zeros on a log axis: hollow triangles on the axis, in the line's colour."""
    for k, line in enumerate(record):
        xs = [x for x, y in zip(line["x"], line["y"]) if y * factor <= 0]
        if xs:
            ax.plot(xs, [floor] * len(xs), linestyle="none", marker="v", markersize=5,
                    markerfacecolor="none", markeredgecolor=line.get("color", "0.3"),
                    clip_on=False, zorder=5)


def line_figure(rows, axes, layout, metric, ylabel, question, logx=None, logy=None):
    """A figure of `metric` (mean over seeds) against layout.x; None when no cell has it.
    Returns (figure, data for figures.json, notes for its caption)."""
    rows = [r for r in rows if num(r.get(metric)) is not None]
    if not rows:
        return None, None, None
    factor = 1.0
    if ylabel.endswith("(ms)") and min(num(r.get(metric)) for r in rows) >= 1000:
        factor, ylabel = 1e-3, ylabel[:-4] + "(s)"  # seconds read better than 400000 ms
    kind = kind_of(metric)
    series_values = (axis_values(rows, layout.series) if layout.series else [None])
    # The panels' data first: whether trace sets share a y axis, and which series repeat.
    fig0_rows, fig0_cols = panel_grid(rows, layout)
    if layout.facet is None and len(fig0_rows) > 1:
        places = [(rk, None) for rk in fig0_rows]
    else:
        places = [(rk, ck) for rk in fig0_rows for ck in fig0_cols]
    pseudo = [(None, rk, ck) for rk, ck in places]
    points = {}
    if layout.x:
        points = series_points(rows, layout, axes, metric, series_values, pseudo)
    ranges = column_ranges(points, pseudo, layout)
    # Ratios share one [0, 1] axis: their scale is the same whatever the trace.
    per_trace = layout.facet is not None and kind != "ratio" and independent_y(ranges)
    fig, axs, panels, used = panel_figure(rows, layout, "col" if per_trace else True)
    same = duplicate_series(points, series_values, len(panels)) if layout.x else {}
    labels = []
    for i, s in enumerate(series_values):
        if i in same:
            labels.append(None)
            continue
        names = [value_text(layout.series, s) if layout.series else "all cells"]
        names += [value_text(layout.series, series_values[j]) for j, k in same.items() if k == i]
        labels.append(" = ".join(names))
    data = {"metric": metric, "question": question, "x": layout.x, "series": layout.series,
            "facet": layout.facet, "rows": layout.rows, "constants": layout.constants,
            "interval": kind, "panels": []}
    shown, marks, zeros_note = [], {}, []
    for p, (ax, rk, ck) in enumerate(panels):
        sel = [r for r in rows if tuple(r.get(a) for a in layout.rows) == rk
               and (layout.facet is None or r.get(layout.facet) == ck)]
        record = []
        if layout.x:
            by_series = {i: points[(p, i)] for i in range(len(series_values)) if (p, i) in points}
            drew = draw_line_panel(ax, by_series, series_values, labels, layout, factor, record,
                                   marks)
            set_x_axis(ax, layout, rows, logx)
        else:
            drew = draw_points_panel(ax, sel, layout, axes, metric, record, factor, marks)
        shown += [d for d in drew if d not in shown]
        title = panel_title(layout, rk, ck)
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3, which="major")
        if not drew:
            ax.set_axis_off()
        note_all_zero(ax, record)
        cells_flags = [f for line in record for f in line["flags"]]
        if cells_flags and all(f for f in cells_flags):
            hatch_panel(ax)
        data["panels"].append({"title": title, "lines": record})
    data["y_scale"] = factor  # figures.json keeps the metric's own unit; the axis shows y * this
    # y limits: per column when trace sets have their own axis, else once.
    groups = {}
    for p, (ax, rk, ck) in enumerate(panels):
        groups.setdefault(ck if per_trace else None, []).append((ax, data["panels"][p]))
    for group in groups.values():
        vals = [y * factor for _, pd in group for line in pd["lines"] for y in line["y"]]
        highs = [hi * factor for _, pd in group for line in pd["lines"]
                 for _, hi in line["ci95"]]
        if not vals:
            continue
        floor = scale_y(group[0][0], vals, highs, kind, logy, zeros_note)
        if floor is not None:
            for ax, pd in group:
                draw_zeros(ax, pd["lines"], floor, factor)
    label_axes(fig, axs, used, axis_label(layout.x) if layout.x else
               axis_label(layout.series or ""), ylabel)
    handles, names = [], []
    if layout.x and layout.series and len(shown) > 1:
        for ax in axs.flat:
            for h, n in zip(*ax.get_legend_handles_labels()):
                if n not in names:
                    handles.append(h)
                    names.append(n)
    for key, marker, text in FLAGS:
        if marks.get(key):
            handles.append(Line2D([], [], linestyle="none", marker=marker, markersize=8,
                                  markerfacecolor="none", markeredgecolor="black"))
            names.append(text)
    if handles:
        bottom_legend(fig, handles, names, axis_label(layout.series) if layout.series else None)
    points_total = sum(len(line["y"]) for pd in data["panels"] for line in pd["lines"])
    data["title"] = title_text(fig, question) + flag_banner(marks, points_total)
    fig.suptitle(data["title"], fontweight="bold")
    notes = {"log_y": any(ax.get_yscale() == "log" for ax in axs.flat),
             "zeros_on_axis": bool(zeros_note), "per_trace_y": per_trace,
             "merged": [labels[i] for i in range(len(labels)) if labels[i] and " = " in labels[i]],
             "marks": marks, "points": points_total,
             "zero_width": sum(1 for pd in data["panels"] for line in pd["lines"]
                               for z, n in zip(line["zero_width"], line["seeds"]) if z and n > 1),
             "seeds": max((n for pd in data["panels"] for line in pd["lines"]
                           for n in line["seeds"]), default=0),
             "interval": kind}
    data["notes"] = notes
    return fig, data, notes


def title_text(fig, text):
    """The question wrapped to the figure's width (8 pt bold: about 13 characters an inch)."""
    return textwrap.fill(text, max(30, int(fig.get_figwidth() * 13)))


def note_all_zero(ax, record):
    """A panel whose every value is 0 says so in words (a log axis has no place for 0)."""
    ys = [y for line in record for y in line["y"]]
    if ys and all(y == 0 for y in ys):
        ax.text(0.5, 0.5, "0 for every configuration", transform=ax.transAxes, ha="center",
                va="center", fontsize=7, color="0.3")


def flag_banner(marks, points):
    """A second title line when a load condition shaped points of the figure."""
    parts = []
    for key, _, text in FLAGS:
        n = marks.get(key, 0)
        if n:
            parts.append(f"{'every' if n >= points else str(n) + ' of ' + str(points)} "
                         f"point{'s' if n != 1 and n < points else ''} {text.split(':')[0]}")
    return ("\nWARNING: " + "; ".join(parts) + " (marked)") if parts else ""


def bottom_legend(fig, handles, names, title):
    """One legend for the figure, under its panels (savefig's tight box takes it in)."""
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(names), 2 if any(len(n) > 28 for n in names) else 3), title=title,
               frameon=False)


def read_ttft(folder, cell):
    path = os.path.join(folder, "cells", cell, "requests.csv")
    out = []
    try:
        with open(path) as f:
            for rec in csv.DictReader(f):
                if rec.get("first_token_s") and rec.get("arrival_s"):
                    out.append(float(rec["first_token_s"]) - float(rec["arrival_s"]))
    except OSError:
        return []
    return sorted(out)


def cdf_figure(folder, rows, axes, layout, question):
    """TTFT CDFs: one curve per cell (seeds of a configuration share a colour), at one value of
    the x axis (the largest; --filter picks another), panels as in line_figure."""
    at_x = None
    if layout.x:
        at_x = max((r.get(layout.x) for r in rows), key=sort_key)
        rows = [r for r in rows if r.get(layout.x) == at_x]
    cdf_layout = Layout(None, layout.series, layout.facet, layout.rows, layout.constants)
    fig, axs, panels, used = panel_figure(rows, cdf_layout, True)
    series_values = (axis_values(rows, layout.series) if layout.series else [None])
    data = {"metric": "ttft_cdf", "question": question,
            "at": {layout.x: at_x} if layout.x else {}, "panels": []}
    if layout.x:
        question = question[:-1] + f" (at {axis_label(layout.x).split(' (')[0]} " \
                                   f"{value_text(layout.x, at_x)})?"
        data["question"] = question
    # Each series' curves, panel by panel; a series whose curves all repeat an earlier one's
    # (the same replays under two labels) is drawn once under both names.
    curves = {}
    for p, (_, rk, ck) in enumerate(panels):
        for k, s in enumerate(series_values):
            sel = [r for r in rows if tuple(r.get(a) for a in layout.rows) == rk
                   and (layout.facet is None or r.get(layout.facet) == ck)
                   and (layout.series is None or r.get(layout.series) == s)]
            curves[(p, k)] = [(r, read_ttft(folder, r["cell"]))
                              for cells in by_configuration(sel, axes).values() for r in cells]
    same = {}
    for j in range(len(series_values)):
        for i in range(j):
            if i not in same and all([c for _, c in curves[(p, i)]] == [c for _, c in
                                     curves[(p, j)]] for p in range(len(panels))):
                same[j] = i
                break
    labels = {}
    for k, s in enumerate(series_values):
        if k not in same:
            labels[k] = " = ".join(value_text(layout.series, series_values[j])
                                   for j in [k] + [j for j, i in same.items() if i == k]) \
                if layout.series else "all cells"
    names, handles, drew_any, marks = [], [], False, {}
    for p, (ax, rk, ck) in enumerate(panels):
        record = []
        for k, s in enumerate(series_values):
            if k in same:
                continue
            for r, ttft in curves[(p, k)]:
                if not ttft:
                    continue
                n = len(ttft)
                label = labels[k]
                (h,) = ax.plot(ttft, [(q + 1) / n for q in range(n)],
                               color=style(k)["color"],
                               linestyle=style(k)["linestyle"], label=label)
                if label not in names:
                    names.append(label)
                    handles.append(h)
                flags = flags_of([r])
                for key in flags:
                    marks[key] = marks.get(key, 0) + 1
                record.append({"label": label, "cell": r["cell"], "requests": n,
                               "flags": flags})
                drew_any = True
        title = panel_title(cdf_layout, rk, ck)
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3)
        if not record:
            ax.set_axis_off()
        elif all(line["flags"] for line in record):
            hatch_panel(ax)
        data["panels"].append({"title": title, "lines": record})
    if not drew_any:
        plt.close(fig)
        return None, None
    axs[0][0].set_xscale("log")
    label_axes(fig, axs, used, "TTFT (s)", "fraction of requests")
    if len(names) > 1:
        bottom_legend(fig, handles, names, axis_label(layout.series) if layout.series else None)
    cells = sum(len(pd["lines"]) for pd in data["panels"])
    banner = ""
    if marks:
        banner = "\nWARNING: " + "; ".join(
            f"{marks[k]} of {cells} cells {t.split(':')[0]}" for k, _, t in FLAGS if marks.get(k)
        ) + " (hatched where all)"
    fig.suptitle(title_text(fig, question) + banner, fontweight="bold")
    data["notes"] = {"marks": marks, "cells": cells,
                     "merged": [v for v in labels.values() if " = " in v]}
    return fig, data


def save(fig, folder, name, creator):
    """plots/NAME.png (300 dpi), .svg and .pdf; returns the PNG's path relative to folder."""
    os.makedirs(os.path.join(folder, "plots"), exist_ok=True)
    for ext in ("png", "svg", "pdf"):
        meta = {"Creator": creator} if creator and ext != "png" else None
        if ext == "png" and creator:
            meta = {"Software": creator}
        tmp = os.path.join(folder, "plots", f".{name}.tmp.{ext}")
        fig.savefig(tmp, dpi=DPI, metadata=meta, bbox_inches="tight", pad_inches=0.03)
        os.replace(tmp, os.path.join(folder, "plots", f"{name}.{ext}"))
    plt.close(fig)
    return os.path.join("plots", f"{name}.png")
