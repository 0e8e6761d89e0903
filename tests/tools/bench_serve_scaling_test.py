"""The core-scaling table (tools/bench_serve_scaling.py): a carried load the grid of loads
cut off is a bound, and the 8-over-2 ratio says so or is not given. Built from open-loop
results written the way tools/bench-serve --open writes them; Debian's python3 only."""
import json
import os
import random
import tempfile
import unittest

import bench_serve_scaling as scaling


def open_result(loads, carried_flags, version="kvtier test"):
    """An open-TRACE.json: one point per load, `carried_flags[i]` whether load i was carried."""
    points = []
    saturation = 0
    for load, carried in zip(loads, carried_flags):
        points.append({"offered_steps_per_s_per_engine": load,
                       "rows": {"verbs": {"p99_us": 500.0 if carried else 5000.0,
                                          "p999_us": 900.0}},
                       "within": carried})
        if carried:
            saturation = max(saturation, load)
    return {"engines": 8, "new_per_step": 4, "points": points, "kvtier_version": version,
            "saturation_steps_per_s_per_engine": saturation,
            "saturation_steps_per_s": saturation * 8,
            "server_cores": "0-1", "client_cores": "8-15"}


def run_table(results):
    """results: {core count: {trace: open result}} -> (scaling.json, scaling.md text)."""
    with tempfile.TemporaryDirectory() as out:
        for k, traces in results.items():
            os.makedirs(os.path.join(out, "server%d" % k))
            for trace, doc in traces.items():
                with open(os.path.join(out, "server%d" % k, "open-%s.json" % trace), "w") as f:
                    json.dump(doc, f)
        rc = scaling.main(["bench_serve_scaling.py", out] + [str(k) for k in results])
        assert rc == 0
        with open(os.path.join(out, "scaling.json")) as f:
            doc = json.load(f)
        with open(os.path.join(out, "scaling.md")) as f:
            return doc, f.read()


class ScalingTableTest(unittest.TestCase):
    def setUp(self):
        self.stdout = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)

    def tearDown(self):
        os.dup2(self.stdout, 1)
        os.close(self.stdout)

    def test_loads_inside_the_grid_give_an_exact_ratio(self):
        loads = [100, 200, 400, 800]
        doc, md = run_table({2: {"azure": open_result(loads, [1, 1, 0, 0])},
                             8: {"azure": open_result(loads, [1, 1, 1, 0])}})
        self.assertAlmostEqual(doc["carried_8_over_2"]["azure"], 2.0)
        self.assertEqual(doc["carried_8_over_2_bound"]["azure"], "exact")
        self.assertIn("azure: carried load on 8 server cores / on 2 = 2.00x (target", md)

    def test_eight_cores_at_the_highest_load_tried_is_a_lower_bound(self):
        loads = [400, 500, 1300]
        doc, md = run_table({2: {"azure": open_result(loads, [1, 0, 0])},
                             8: {"azure": open_result(loads, [1, 1, 1])}})
        self.assertAlmostEqual(doc["carried_8_over_2"]["azure"], 3.25)
        self.assertEqual(doc["carried_8_over_2_bound"]["azure"], "at_least")
        self.assertIn(">= 3.25x, 8 cores carried the highest load tried", md)
        self.assertIn(">= 1300 (10400), the highest tried", md)

    def test_two_cores_carrying_nothing_gives_no_ratio(self):
        loads = [50, 100, 400]
        doc, md = run_table({2: {"mooncake": open_result(loads, [0, 0, 0])},
                             8: {"mooncake": open_result(loads, [1, 1, 1])}})
        self.assertNotIn("mooncake", doc["carried_8_over_2"])
        self.assertIn("none of 50, 100, 400 tried", md)
        self.assertIn("mooncake: 8 cores against 2: not measured (2 cores carried none of the "
                      "loads tried: try lower loads)", md)
        self.assertNotIn("0 (0)", md)

    def test_two_cores_at_the_highest_load_tried_gives_no_ratio(self):
        loads = [50, 100]
        doc, md = run_table({2: {"mooncake": open_result(loads, [1, 1])},
                             8: {"mooncake": open_result(loads, [1, 1])}})
        self.assertNotIn("mooncake", doc["carried_8_over_2"])
        self.assertIn("try higher loads", md)

    def test_random_grids_against_a_reference(self):
        """The bound and ratio by another road: sort the loads each side carried."""
        rng = random.Random(37)
        for _ in range(300):
            loads = sorted(rng.sample(range(10, 2000, 10), rng.randint(1, 6)))
            flags = {k: [rng.random() < 0.6 for _ in loads] for k in (2, 8)}
            doc, _ = run_table({k: {"t": open_result(loads, f)} for k, f in flags.items()})
            best = {k: max([l for l, c in zip(loads, f) if c], default=0)
                    for k, f in flags.items()}
            if best[2] == 0 or best[2] == loads[-1]:
                self.assertNotIn("t", doc["carried_8_over_2"])
                continue
            self.assertAlmostEqual(doc["carried_8_over_2"]["t"], best[8] / best[2])
            want = "at_least" if best[8] == loads[-1] else "exact"
            self.assertEqual(doc["carried_8_over_2_bound"]["t"], want)
            for row in doc["rows"]:
                k = row["server_core_count"]
                self.assertEqual(row["carried_bound"],
                                 "below_lowest" if best[k] == 0
                                 else "at_least" if best[k] == loads[-1] else "exact")


if __name__ == "__main__":
    unittest.main()
