"""The report's statistics (tools/report_stats.py, tools/sweep_report.py, tools/slo_report.py,
tools/report_timeseries.py; docs/sweep.md, "Reports"), on random inputs against a small,
separately written reference: intervals never cross a figure's bounds, a zero-width interval is
the value, "best" only where intervals separate, Pareto ties within the search's precision, and
about 200 points to a time series. Debian's python3 and its standard library (plus matplotlib,
which the report modules load); under a second.
"""
import math
import random
import statistics
import unittest

import report_stats as rs
import report_timeseries
import slo_report
import sweep_report

# Student t's 97.5th percentiles, from a printed table (Fisher & Yates), df 1-5.
T = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706}


def reference(values, kind):
    """The same interval by another road: statistics.stdev, and the scale's inverse applied to
    the t interval of its own delta-method standard error."""
    n = len(values)
    m = statistics.fmean(values)
    if n < 2 or len(set(values)) == 1:
        return m, m
    se = statistics.stdev(values) / math.sqrt(n)
    if kind == "ratio" and 0 < m < 1:
        logit = lambda p: math.log(p) - math.log1p(-p)
        inv = lambda x: math.exp(x) / (1 + math.exp(x))
        g = se / (m * (1 - m))
        return inv(logit(m) - T[n - 1] * g), inv(logit(m) + T[n - 1] * g)
    if m > 0:
        g = se / m
        return math.exp(math.log(m) - T[n - 1] * g), math.exp(math.log(m) + T[n - 1] * g)
    return m - T[n - 1] * se, m + T[n - 1] * se


class Intervals(unittest.TestCase):
    def assertClose(self, iv, ref):
        """Each side's distance from the mean within 0.1% of the reference's (the t tables
        differ in their fourth digit) and 1e-12."""
        for got, want in ((iv.mean - iv.lo, iv.mean - ref[0]), (iv.hi - iv.mean, ref[1] - iv.mean)):
            self.assertAlmostEqual(got, want, delta=1e-3 * abs(want) + 1e-12)

    def test_random_ratios_stay_within_0_and_1(self):
        rnd = random.Random(38)
        for _ in range(2000):
            n = rnd.randint(2, 6)
            vals = [min(1.0, max(0.0, rnd.choice([0.0, 1.0, rnd.random()]))) for _ in range(n)]
            iv = rs.interval(vals, "ratio")
            self.assertTrue(0.0 <= iv.lo <= iv.mean <= iv.hi <= 1.0, (vals, iv.lo, iv.hi))
            self.assertClose(iv, reference(vals, "ratio"))

    def test_random_positive_figures_stay_above_0(self):
        rnd = random.Random(3)
        for _ in range(2000):
            n = rnd.randint(2, 6)
            scale = 10 ** rnd.uniform(-3, 6)
            vals = [rnd.choice([0.0, rnd.expovariate(1.0) * scale]) for _ in range(n)]
            iv = rs.interval(vals, "positive")
            self.assertGreaterEqual(iv.lo, 0.0)
            if iv.mean > 0:
                self.assertGreater(iv.lo, 0.0)
            self.assertTrue(iv.lo <= iv.mean <= iv.hi)
            self.assertClose(iv, reference(vals, "positive"))

    def test_the_symmetric_t_interval_where_nothing_bounds_it(self):
        iv = rs.interval([-1.0, 0.0, 4.0], "any")
        half = T[2] * statistics.stdev([-1.0, 0.0, 4.0]) / math.sqrt(3)
        self.assertAlmostEqual(iv.hi - iv.mean, half, places=3)
        self.assertAlmostEqual(iv.mean - iv.lo, half, places=3)

    def test_zero_width_is_the_value_and_says_so(self):
        for vals in ([0.5, 0.5, 0.5], [7.0]):
            iv = rs.interval(vals, "ratio" if vals[0] < 1 else "positive")
            self.assertTrue(iv.zero_width)
            self.assertEqual((iv.lo, iv.hi), (iv.mean, iv.mean))
        self.assertEqual(sweep_report.interval_text(rs.interval([3, 3, 3], "positive"),
                                                    "{:.1f}"), "3.0 ± 0")
        self.assertEqual(sweep_report.interval_text(rs.interval([3], "positive"), "{:.1f}"),
                         "3.0")
        text = sweep_report.interval_text(rs.interval([0.1, 0.2, 0.3], "ratio"), "{:.3f}")
        self.assertRegex(text, r"^0\.200 \+0\.\d+/−0\.\d+$")

    def test_kinds(self):
        self.assertEqual(rs.kind_of("hit_ratio.by_tier.host.tokens"), "ratio")
        self.assertEqual(rs.kind_of("latency_ms.ttft.p99"), "positive")
        self.assertEqual(rs.kind_of("d2h_kb_per_token"), "positive")
        self.assertEqual(rs.kind_of("load.queue_growth"), "any")


class Standings(unittest.TestCase):
    def groups(self, *samples):
        return [((k,), {"m": rs.interval(v, "positive")}, []) for k, v in enumerate(samples)]

    def test_best_only_where_intervals_separate(self):
        g = self.groups([10, 11, 12], [20, 21, 22], [30, 31, 32])
        self.assertEqual(sweep_report.standings(g, "m", "min"), {(0,): "best"})
        self.assertEqual(sweep_report.standings(g, "m", "max"), {(2,): "best"})

    def test_overlapping_intervals_tie(self):
        g = self.groups([10, 15, 20], [12, 13, 14], [30, 31, 32])
        self.assertEqual(sweep_report.standings(g, "m", "min"), {(0,): "tied", (1,): "tied"})

    def test_all_tied_marks_none(self):
        g = self.groups([10, 20, 30], [12, 22, 32])
        self.assertEqual(sweep_report.standings(g, "m", "min"), {})

    def test_equal_points_tie(self):
        g = self.groups([5], [5], [9])
        self.assertEqual(sweep_report.standings(g, "m", "min"), {(0,): "tied", (1,): "tied"})


class Pareto(unittest.TestCase):
    def test_a_dearer_configuration_within_the_precision_is_not_on_the_front(self):
        # The case: $2,051 against $586 for 0.00007 req/s more (rate x 0.1363 and
        # 0.13637: within the search's 5%).
        cheap = (0.1363, 0.4630, 586.0, "cheap")
        dear = (0.13637, 0.46307, 2051.0, "dear")
        more = (0.1423, 0.4840, 2051.0, "more")  # 4.4% more: still within 5%
        much = (0.20, 0.68, 3000.0, "much")      # beyond it
        front = slo_report.pareto_front([cheap, dear, more, much], 0.05)
        self.assertEqual([p[3] for p in front], ["cheap", "much"])

    def test_the_front_against_brute_force(self):
        rnd = random.Random(7)
        for _ in range(300):
            pts = [(rnd.choice([1, 2, 3, 4]) * (1 + rnd.uniform(-0.01, 0.01)), 0,
                    rnd.choice([100.0, 200.0, 300.0]), str(i)) for i in range(6)]
            front = {p[3] for p in slo_report.pareto_front(pts, 0.05)}
            for p in pts:
                beaten = any(q[2] <= p[2] and q[0] * 1.05 >= p[0]
                             and (q[2] < p[2] or q[0] > p[0] * 1.05) for q in pts if q is not p)
                self.assertEqual(p[3] in front, not beaten)


    def test_labels_of_close_points_do_not_overlap(self):
        # Two configurations a few per cent apart in load at one cost (the agentic panel of the
        # SLO study: "write-through, 1M" over "write-back, 1M" before the labels were moved).
        fig, ax = slo_report.plt.subplots(figsize=(3.5, 3.2))
        ax.set_xlim(0, 1)
        notes = [ax.annotate(name, (x, 0.5), xytext=(5, -4), textcoords="offset points",
                             va="top", fontsize=7)
                 for name, x in (("write-through, 1M", 0.40), ("write-back, 1M", 0.45),
                                 ("write-back, 8M", 0.47))]
        slo_report.separate_labels(fig, notes)
        r = fig.canvas.get_renderer()
        boxes = [n.get_window_extent(r) for n in notes]
        slo_report.plt.close(fig)
        for i in range(len(boxes)):
            for j in range(i):
                self.assertFalse(boxes[i].overlaps(boxes[j]), (i, j))


class TimeSeries(unittest.TestCase):
    def test_about_200_points(self):
        self.assertEqual(report_timeseries.default_interval(1330), 5)
        self.assertEqual(report_timeseries.default_interval(100), 1)
        for seconds in (60, 500, 1330, 28302, 439411, 3e6):
            points = seconds / report_timeseries.default_interval(seconds)
            self.assertTrue(60 <= points <= 400, (seconds, points))


class Warnings(unittest.TestCase):
    """report.md's warnings: each cause named with its own advice, never another's."""
    def row(self, cause, overloaded, advice):
        return {"load.overloaded": "true" if overloaded else "false", "load.cause": cause,
                "load.clock_lag": "true" if cause == "clock_lag" else "false",
                "load.l3_backpressure": "true" if cause == "l3_backpressure" else "false",
                "load.advice": advice, "load.queue_wait_s_by_quarter": "1.0 | 2.0 | 3.0 | 9.5"}

    def test_each_cause_with_its_advice(self):
        rows = [self.row("arrivals", True, "stretch the trace"),
                self.row("clock_lag", True, "lower --speed"),
                self.row("l3_backpressure", False, "a faster storage backend"),
                {"load.overloaded": "false"}]
        md = "\n".join(sweep_report.warnings_section(rows))
        arrivals, lag, l3 = (next(line for line in md.split("\n") if head in line) for head in
                             ("OVERLOADED**", "CLOCK LAG", "L3 BACKPRESSURE"))
        self.assertIn("1 of 4 cells", arrivals)
        self.assertIn("stretch the trace", arrivals)
        self.assertIn("1.0-1.0 s in the first quarter", arrivals)
        self.assertIn("lower --speed", lag)
        self.assertNotIn("stretch the trace", lag)
        self.assertIn("did not keep up with the wall clock", lag)
        self.assertIn("a faster storage backend", l3)
        self.assertNotIn("stretch the trace", l3)
        self.assertNotIn("queue grew", l3)  # not overloaded: the queue held

    def test_nothing_flagged_says_nothing(self):
        self.assertEqual(sweep_report.warnings_section([{"load.overloaded": "false"}]), [])


if __name__ == "__main__":
    unittest.main()
