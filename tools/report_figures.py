"""The figures of kvtier's sweep reports (tools/sweep_report.py; docs/sweep.md, "Reports").

Every figure has one metric. Its layout comes from the grid: an x axis (numeric), panel columns
(the facet: the trace set by default), panel rows (the axes left over) and one line per value of
the series axis, so that each line is one configuration and each point the mean of that
configuration's cells, which differ only by seed (with a 95% t-interval band when there are
several). Nothing is averaged over a categorical axis: a point that would gather cells of two
configurations is an error. Each figure is written as PNG (300 dpi), SVG and PDF, and its data to
plots/figures.json.
"""
import csv
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from report_stats import (by_configuration, is_numeric_axis, mean_ci,  # noqa: E402
                          num, ordered, short_number, sort_key)

DPI = 300
PANEL_W, PANEL_H = 2.3, 1.75  # inches: three panels fill a 7 in text width
COLUMN_W = 3.3                # one panel: a single column
plt.rcParams.update({"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8,
                     "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
                     "figure.titlesize": 8, "lines.linewidth": 1.2, "lines.markersize": 3.5,
                     "svg.fonttype": "none", "pdf.fonttype": 42})
COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
LINESTYLES = ["-", "--", "-.", ":"]


class Layout:
    """Which grid axis plays which part in a figure."""

    def __init__(self, x, series, facet, rows, constants):
        self.x, self.series, self.facet = x, series, facet
        self.rows, self.constants = rows, constants

    def assigned(self):
        return [a for a in [self.x, self.series, self.facet] + self.rows if a]


def axis_label(axis):
    names = {"cache.host_tokens": "host tier capacity (tokens)",
             "cache.device_tokens": "device tier capacity (tokens)",
             "storage.capacity_tokens": "storage capacity (tokens)",
             "trace.time_scale": "trace time scale (x recorded times)"}
    if axis in names:
        return names[axis]
    if axis.endswith("_tokens"):
        return f"{axis} (tokens)"
    if axis.endswith("_blocks"):
        return f"{axis} (blocks)"
    return axis


def value_text(axis, v):
    x = num(v)
    if x is not None and (axis.endswith("_tokens") or axis.endswith("_blocks")):
        return short_number(x)
    return str(v)


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
        parts.append(str(col_key) if layout.facet == "traces" else
                     f"{layout.facet} = {value_text(layout.facet, col_key)}")
    parts += [f"{a} = {value_text(a, v)}" for a, v in zip(layout.rows, row_key)]
    return "\n".join(parts)


def line_points(rows, layout, axes, metric):
    """{x value: (mean, ci, n, cell ids)}: each x one configuration's cells, never several."""
    points = {}
    for cfg, cells in by_configuration(rows, axes).items():
        xv = cells[0].get(layout.x) if layout.x else None
        if xv in points:
            raise AssertionError(f"{metric}: two configurations at one point ({cfg})")
        mean, ci, n = mean_ci(r.get(metric) for r in cells)
        if mean is not None:
            points[xv] = (mean, ci, n, [r["cell"] for r in cells])
    return points


def style(i):
    """Colour, marker and dash all change with the series, so that lines which coincide stay
    visible (hollow markers of shrinking size) and a grey print tells them apart."""
    return dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)], markerfacecolor="none",
                markersize=max(2.5, 6.0 - 0.8 * i))


def auto_log(values, asked, ratio):
    if asked is not None:
        return asked
    vals = [v for v in values if v is not None]
    return bool(vals) and min(vals) > 0 and max(vals) / min(vals) >= ratio


def figure_size(nrows, ncols):
    if nrows == 1 and ncols == 1:
        return COLUMN_W, 2.4
    return min(7.2, PANEL_W * ncols + 0.7), PANEL_H * nrows + 0.8


def draw_line_panel(ax, rows, layout, axes, metric, series_values, record, factor):
    drew = []
    for i, s in enumerate(series_values):
        sel = [r for r in rows if layout.series is None or r.get(layout.series) == s]
        pts = line_points(sel, layout, axes, metric)
        if not pts:
            continue
        xs = sorted(pts, key=sort_key)
        xnum = [num(x) for x in xs]
        ys = [pts[x][0] for x in xs]
        label = value_text(layout.series, s) if layout.series else "all cells"
        ax.plot(xnum, [y * factor for y in ys], label=label, **style(i))
        lo = [(pts[x][0] - (pts[x][1] or 0)) * factor for x in xs]
        hi = [(pts[x][0] + (pts[x][1] or 0)) * factor for x in xs]
        if any(pts[x][1] is not None for x in xs):
            # Several series' bands stack: a lighter fill each, and the band's edges drawn thin in
            # its colour, keep every band readable where others overlap it.
            fill = max(0.06, min(0.2, 0.4 / max(1, len(series_values))))
            ax.fill_between(xnum, lo, hi, color=style(i)["color"], alpha=fill, linewidth=0)
            for edge in (lo, hi):
                ax.plot(xnum, edge, color=style(i)["color"], linewidth=0.5, alpha=0.6)
        drew.append(label)
        record.append({"label": label, "x": xnum, "y": ys,
                       "ci95": [pts[x][1] for x in xs], "seeds": [pts[x][2] for x in xs],
                       "cells": [pts[x][3] for x in xs]})
    return drew


def draw_points_panel(ax, rows, layout, axes, metric, record, factor):
    """No numeric x: the series' values along x, one point (and interval) per configuration."""
    cats = axis_values(rows, layout.series) if layout.series else [None]
    drew = []
    pts = line_points(rows, Layout(layout.series, None, None, [], {}), axes, metric)
    for i, c in enumerate(cats):
        if c not in pts:
            continue
        mean, ci, n, cells = pts[c]
        ax.errorbar([i], [mean * factor], yerr=[[ci * factor], [ci * factor]] if ci else None,
                    capsize=2, **style(i))
        drew.append(str(c))
        record.append({"label": str(c), "x": [i], "y": [mean], "ci95": [ci], "seeds": [n],
                       "cells": [cells]})
    ax.set_xlim(-0.5, len(cats) - 0.5)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([value_text(layout.series or "", c) for c in cats], rotation=30,
                       ha="right")
    return drew


def set_x_axis(ax, layout, rows, logx):
    xs = sorted({num(r.get(layout.x)) for r in rows})
    if auto_log(xs, logx, 10):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    if len(xs) <= 6:
        ax.set_xticks(xs)
        ax.set_xticklabels([value_text(layout.x, x) for x in xs])


def panel_figure(rows, layout):
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
    fig, axs = plt.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True,
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


def line_figure(rows, axes, layout, metric, ylabel, logx=None, logy=None):
    """A figure of `metric` (mean over seeds) against layout.x; None when no cell has it.
    Returns (figure, data for figures.json)."""
    rows = [r for r in rows if num(r.get(metric)) is not None]
    if not rows:
        return None, None
    factor = 1.0
    if ylabel.endswith("(ms)") and min(num(r.get(metric)) for r in rows) >= 1000:
        factor, ylabel = 1e-3, ylabel[:-4] + "(s)"  # seconds read better than 400000 ms
    fig, axs, panels, used = panel_figure(rows, layout)
    series_values = (axis_values(rows, layout.series) if layout.series else [None])
    data = {"metric": metric, "x": layout.x, "series": layout.series, "facet": layout.facet,
            "rows": layout.rows, "constants": layout.constants, "panels": []}
    labels = []
    for ax, rk, ck in panels:
        sel = [r for r in rows if tuple(r.get(a) for a in layout.rows) == rk
               and (layout.facet is None or r.get(layout.facet) == ck)]
        record = []
        if layout.x:
            drew = draw_line_panel(ax, sel, layout, axes, metric, series_values, record, factor)
            set_x_axis(ax, layout, rows, logx)
        else:
            drew = draw_points_panel(ax, sel, layout, axes, metric, record, factor)
        labels += [d for d in drew if d not in labels]
        title = panel_title(layout, rk, ck)
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3, which="major")
        if not drew:
            ax.set_axis_off()
        data["panels"].append({"title": title, "lines": record})
    data["y_scale"] = factor  # figures.json keeps the metric's own unit; the axis shows y * this
    ys = [y * factor for p in data["panels"] for line in p["lines"] for y in line["y"]]
    if auto_log(ys, logy, 100):
        axs[0][0].set_yscale("log")
    elif ys and min(ys) >= 0:
        # Fractions and bytes start at zero, so that a line's height reads as its size.
        highs = [(y + (c or 0)) * factor for p in data["panels"] for line in p["lines"]
                 for y, c in zip(line["y"], line["ci95"])]
        top = max(max(highs) * 1.1, 1e-9)  # room for the bands too
        if metric.startswith("hit_ratio"):
            top = min(top, 1.0)
        axs[0][0].set_ylim(0, top)
    label_axes(fig, axs, used, axis_label(layout.x) if layout.x else (layout.series or ""),
               ylabel)
    if layout.x and layout.series and len(labels) > 1:
        handles, names = [], []
        for ax in axs.flat:
            for h, n in zip(*ax.get_legend_handles_labels()):
                if n not in names:
                    handles.append(h)
                    names.append(n)
        bottom_legend(fig, handles, names, layout.series)
    return fig, data


def bottom_legend(fig, handles, names, title):
    """One legend for the figure, under its panels (savefig's tight box takes it in)."""
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(names), 3), title=title, frameon=False)


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


def cdf_figure(folder, rows, axes, layout):
    """TTFT CDFs: one curve per cell (seeds of a configuration share a colour), at one value of
    the x axis (the largest; --filter picks another), panels as in line_figure."""
    at_x = None
    if layout.x:
        at_x = max((r.get(layout.x) for r in rows), key=sort_key)
        rows = [r for r in rows if r.get(layout.x) == at_x]
    cdf_layout = Layout(None, layout.series, layout.facet, layout.rows, layout.constants)
    fig, axs, panels, used = panel_figure(rows, cdf_layout)
    series_values = (axis_values(rows, layout.series) if layout.series else [None])
    data = {"metric": "ttft_cdf", "at": {layout.x: at_x} if layout.x else {}, "panels": []}
    names, handles, drew_any = [], [], False
    for ax, rk, ck in panels:
        record = []
        for k, s in enumerate(series_values):
            sel = [r for r in rows if tuple(r.get(a) for a in layout.rows) == rk
                   and (layout.facet is None or r.get(layout.facet) == ck)
                   and (layout.series is None or r.get(layout.series) == s)]
            for cfg, cells in by_configuration(sel, axes).items():
                for r in cells:
                    ttft = read_ttft(folder, r["cell"])
                    if not ttft:
                        continue
                    n = len(ttft)
                    label = value_text(layout.series, s) if layout.series else "all cells"
                    (h,) = ax.plot(ttft, [(q + 1) / n for q in range(n)],
                                   color=style(k)["color"],
                                   linestyle=style(k)["linestyle"], label=label)
                    if label not in names:
                        names.append(label)
                        handles.append(h)
                    record.append({"label": label, "cell": r["cell"], "requests": n})
                    drew_any = True
        title = panel_title(cdf_layout, rk, ck)
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3)
        if not record:
            ax.set_axis_off()
        data["panels"].append({"title": title, "lines": record})
    if not drew_any:
        plt.close(fig)
        return None, None
    axs[0][0].set_xscale("log")
    label_axes(fig, axs, used, "TTFT (s)", "fraction of requests")
    if len(names) > 1:
        bottom_legend(fig, handles, names, layout.series)
    return fig, data


def save(fig, folder, name, creator):
    """plots/NAME.png (300 dpi), .svg and .pdf; returns the PNG's path relative to folder."""
    os.makedirs(os.path.join(folder, "plots"), exist_ok=True)
    for ext in ("png", "svg", "pdf"):
        meta = {"Creator": creator} if creator and ext != "png" else None
        if ext == "png" and creator:
            meta = {"Software": creator}
        fig.savefig(os.path.join(folder, "plots", f"{name}.{ext}"), dpi=DPI, metadata=meta,
                    bbox_inches="tight", pad_inches=0.03)
    plt.close(fig)
    return os.path.join("plots", f"{name}.png")
