"""Each check of tools/differential and tools/metamorphic fails on a deliberately broken model
(tools/difftest/broken_kvtier.py stands in for the kvtier binary): a check that cannot fail
proves nothing. KVTIER_BIN names the real binary (the full-mode defects corrupt its outputs).

  KVTIER_BIN=build/kvtier /usr/bin/python3 -m unittest test_checks_fire   (in tools/difftest)
"""

import collections
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases  # noqa: E402
import differential  # noqa: E402
import metamorphic  # noqa: E402
import runner  # noqa: E402

REAL = os.path.abspath(os.environ.get("KVTIER_BIN", runner.kvtier_binary()))
BROKEN = os.path.join(HERE, "broken_kvtier.py")


class Broken:
    """Runs the block with KVTIER_BIN pointing at the broken stand-in."""

    def __init__(self, defect):
        self.defect = defect

    def __enter__(self):
        os.environ.update(KVTIER_BIN=BROKEN, KVTIER_BROKEN=self.defect, KVTIER_REAL_BIN=REAL)

    def __exit__(self, *exc):
        os.environ["KVTIER_BIN"] = REAL
        for k in ("KVTIER_BROKEN", "KVTIER_REAL_BIN"):
            os.environ.pop(k, None)


def first_failure(check, seeds):
    """The first seed whose check reports a failure, and what it said; (None, None) if none."""
    for seed in seeds:
        why = check(seed)
        if why:
            return seed, why
    return None, None


class DifferentialFires(unittest.TestCase):
    def judge(self, modes=False):
        return lambda seed: differential.judge(cases.draw_case(seed), modes)[0]

    def test_a_host_tier_that_skips_backups_diverges(self):
        with Broken("pinned_copies"):
            seed, why = first_failure(self.judge(), range(1, 200))
            self.assertIsNotNone(seed, "the differential run missed pinned host copies")
            # the printed command reproduces it, shrunk
            case = cases.draw_case(seed)
            small = differential.shrink.shrink(case, lambda c: differential.judge(c)[0] is not None)
            self.assertLessEqual(sum(len(t["lines"]) for t in small["traces"]),
                                 sum(len(t["lines"]) for t in case["traces"]))
            env = dict(os.environ)
            p = subprocess.run([sys.executable, os.path.join(HERE, "differential.py"), "--case",
                                json.dumps(small)], capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 1, p.stdout[-2000:] + p.stderr[-2000:])
            self.assertIn("difference:", p.stdout)

    def test_an_mru_device_diverges(self):
        with Broken("mru"):
            seed, _ = first_failure(self.judge(), range(1, 200))
            self.assertIsNotNone(seed, "the differential run missed MRU eviction")

    def test_full_mode_held_to_hitrate_mode(self):
        with Broken("full_hits"):
            seed, _ = first_failure(self.judge(modes=True), range(1, 100))
            self.assertIsNotNone(seed, "the modes check missed a hit moved between tiers")


class MetamorphicFires(unittest.TestCase):
    def check(self, name):
        record = collections.defaultdict(lambda: [0, 0])
        return lambda seed: metamorphic.PROPERTIES[name](seed, [], record)

    def test_monotone_sees_a_host_that_shrinks_the_device(self):
        # device 2 blocks, write_through, prompts A, B, A: with no host A is a device hit; with a
        # host of one block the broken rule moves A off the device to back up B
        def prompt(i):
            return {"arrival_s": float(i), "output_length": 1, "input_length": 5,
                    "block_hashes": [[1, 2, 1][i]]}
        case = {"config": {"cache.block_size": 4, "cache.device_blocks": 2,
                           "cache.host_blocks": 0, "storage.capacity_blocks": 0,
                           "cache.write_policy": "write_through", "cache.eviction": "lru",
                           "cache.storage_write": "always"},
                "traces": [{"header": {"kvtier_trace": 1, "block_size": 4},
                            "lines": [prompt(i) for i in range(3)]}]}
        record = collections.defaultdict(lambda: [0, 0])
        self.assertIsNone(metamorphic.compare_growth(case, "host", 1, record))  # the real one
        with Broken("move_device"):
            why = metamorphic.compare_growth(case, "host", 1, record)
        self.assertIsNotNone(why, "growing the host did not lower the broken model's hits")
        self.assertIn("lowers the hits from 1 to 0", why)

    def test_policies_sees_write_back_evicting_its_newest(self):
        with Broken("write_back_mru"):
            seed, why = first_failure(self.check("policies"), range(1, 60))
            self.assertIsNotNone(seed, "write_back and write_through agreed on the broken model")
            self.assertNotIn("does not test the property", why)

    def test_tokens_sees_an_uncounted_recomputation(self):
        for defect in ("recomputed", "computed"):
            with Broken(defect):
                seed, why = first_failure(self.check("tokens"), range(1, 40))
                self.assertIsNotNone(seed, defect)

    def test_links_sees_a_byte_crossing_twice(self):
        with Broken("link_bytes"):
            seed, why = first_failure(self.check("links"), range(1, 40))
            self.assertIsNotNone(seed)
            self.assertIn("d2h link", why)


if __name__ == "__main__":
    unittest.main()
