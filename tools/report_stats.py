"""Statistics and grouping for kvtier's sweep reports (tools/sweep_report.py; docs/sweep.md).

A configuration is one value of every grid axis; its cells differ only by seed. Figures and tables
summarise a configuration's cells by their mean and a 95% t-interval, and never pool or average
cells of different configurations.
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


def mean_ci(values):
    """(mean, half width of the 95% t-interval or None for one value, n) of the numbers given."""
    vals = [v for v in (num(x) for x in values) if v is not None]
    if not vals:
        return None, None, 0
    n = len(vals)
    mean = sum(vals) / n
    if n < 2:
        return mean, None, n
    var = sum((v - mean) ** 2 for v in vals) / (n - 1)
    return mean, t975(n - 1) * math.sqrt(var / n), n


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
