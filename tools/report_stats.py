"""Statistics and grouping for kvtier's sweep reports (tools/sweep_report.py; docs/sweep.md).

A configuration is one value of every grid axis; its cells differ only by seed. Figures and tables
summarise a configuration's cells by their mean and a 95% interval that cannot cross the figure's
bounds (interval, below), and never pool or average cells of different configurations.
"""
import math

# Student's t, 97.5th percentile, by degrees of freedom (two-sided 95% interval).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
        17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000,
        120: 1.980}


def num(v):
    if v is None or v == "" or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def t975(df):
    if df in T975:
        return T975[df]
    below = [k for k in T975 if k <= df]
    return T975[max(below)] if df < 120 else 1.96


# How an interval over a configuration's seeds is computed, by the kind of figure
# (docs/sweep.md, "Reports"): a Student t interval of the mean on a scale where the figure's
# bounds are out of reach, mapped back (the delta method: the mean's standard error divided by
# the scale's slope at the mean), so that a ratio's interval stays within [0, 1] and a
# non-negative figure's above 0. It is asymmetric around the mean; tables give it as +up/-down.
METHODS = {
    "ratio": "Student t on the logit scale",
    "positive": "Student t on the log scale",
    "any": "Student t",
}


def kind_of(metric):
    """ratio: fractions in [0, 1]; positive: figures that cannot go below 0; any: the rest."""
    m = metric.lower()
    if m.startswith("hit_ratio") or m.endswith(("_share", "_busy", "ratio")) or "hit_ratio" in m:
        return "ratio"
    if m.startswith(("queue_growth", "load.queue_growth")):
        return "any"
    return "positive"


class Interval:
    """A configuration's figure over its seeds: mean, 95% interval [lo, hi], n, and how."""

    def __init__(self, mean, lo, hi, n, kind, values):
        self.mean, self.lo, self.hi, self.n, self.kind = mean, lo, hi, n, kind
        self.values = values

    @property
    def zero_width(self):
        """Every seed gave the same value (or one seed): the interval is a point."""
        return self.n >= 1 and max(self.values) == min(self.values)

    @property
    def method(self):
        return METHODS[self.kind]

    def overlaps(self, other):
        return self.lo <= other.hi and other.lo <= self.hi


def interval(values, kind="any"):
    """The 95% interval of the mean of the numbers given; None when there are none. A zero-width
    interval (n = 1, or every value the same) is the value itself."""
    vals = [v for v in (num(x) for x in values) if v is not None]
    if not vals:
        return None
    n = len(vals)
    mean = sum(vals) / n
    if n < 2 or max(vals) == min(vals):
        return Interval(mean, mean, mean, n, kind, vals)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    if kind == "ratio" and 0 < mean < 1:
        center = math.log(mean / (1 - mean))
        w = half / (mean * (1 - mean))
        lo, hi = (1 / (1 + math.exp(-(center + d))) for d in (-w, w))
    elif kind in ("positive", "ratio") and mean > 0:
        w = half / mean
        lo, hi = mean * math.exp(-w), mean * math.exp(w)
        if kind == "ratio":
            hi = min(hi, 1.0)  # a ratio's mean at exactly 1 with spread cannot happen: safety
    else:
        lo, hi = mean - half, mean + half
    return Interval(mean, lo, hi, n, kind, vals)


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def sort_key(v):
    x = num(v)
    return (0, x, "") if x is not None else (1, 0.0, str(v))


def is_numeric_axis(rows, axis):
    vals = [r.get(axis) for r in rows]
    return bool(vals) and all(num(v) is not None for v in vals)


def configuration(row, axes):
    return tuple(row.get(a) for a in axes)


def by_configuration(rows, axes):
    """{configuration: [rows]} in first-seen order: the cells of one configuration (its seeds)."""
    out = {}
    for r in rows:
        out.setdefault(configuration(r, axes), []).append(r)
    return out


def matches(row, key, wanted):
    """A --filter test: equal as numbers when both are, else as text."""
    have = row.get(key)
    a, b = num(have), num(wanted)
    if a is not None and b is not None:
        return a == b
    return str(have) == str(wanted)


def apply_filters(rows, filters):
    """Rows that pass every key's filter (a key given twice keeps either value)."""
    by_key = {}
    for key, value in filters:
        by_key.setdefault(key, []).append(value)
    return [r for r in rows
            if all(any(matches(r, k, v) for v in vs) for k, vs in by_key.items())]


def short_number(x):
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:g}{unit}"
    return f"{x:g}"
