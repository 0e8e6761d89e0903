"""Plots one replay's timeseries.csv (output.timeseries; schema: docs/outputs.md) as four panels
over the replay's seconds sharing one time axis: requests waiting and running; ready blocks per
tier; each link's busy fraction; prompt tokens hit and computed per second. Written beside the
CSV as plots/timeseries.png (300 dpi), .svg and .pdf.
"""
import csv
import os

import report_figures as rf


class BadSeries(Exception):
    pass


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
    return {k: [float(r[k]) for r in rows] for k in rows[0]}


def plot(folder, title=""):
    s = read(folder)
    t = s["second"]
    fig, axs = rf.plt.subplots(4, 1, sharex=True, figsize=(rf.COLUMN_W, 6.4),
                               constrained_layout=True)
    panels = [
        ("requests", [("waiting_requests", "waiting"), ("running_requests", "running")], None),
        ("ready blocks", [("device_blocks", "device"), ("host_blocks", "host")], None),
        ("link busy (fraction)", [("h2d_busy", "PCIe H2D"), ("d2h_busy", "PCIe D2H"),
                                  ("storage_read_busy", "storage read"),
                                  ("storage_write_busy", "storage write")], (0, 1.02)),
        ("tokens / s", [("hit_tokens", "hit (any tier)"), ("computed_tokens", "computed")],
         None),
    ]
    s["hit_tokens"] = [a + b + c for a, b, c in zip(s["device_hit_tokens"], s["host_hit_tokens"],
                                                     s["storage_hit_tokens"])]
    for ax, (ylabel, columns, ylim) in zip(axs, panels):
        for i, (col, label) in enumerate(columns):
            if any(s[col]):
                ax.plot(t, s[col], label=label, color=rf.COLORS[i], linewidth=0.9)
        ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # Above the panel, off the data.
            ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False, ncol=2,
                      borderaxespad=0.1, handlelength=1.2, columnspacing=0.8)
    if title:
        axs[0].set_title(title)
    axs[-1].set_xlabel("time (s of the replay's clock)")
    path = rf.save(fig, folder, "timeseries", "")
    print(f"report: {os.path.join(folder, path)} (and .svg, .pdf)")
