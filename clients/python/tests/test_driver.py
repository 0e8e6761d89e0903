"""The Python driver replays a trace against kvtier serve and gets the hit ratios of
``kvtier replay --clock wall`` with the same config and trace (item 7's end-to-end test).

The trace is made here: conversations whose turns extend the previous turn's prompt, arriving
far apart (no two requests overlap), on tiers small enough that blocks are evicted from the
device and the host and come back from host memory and storage, so the ratios depend on every
cache decision."""

import json
import os
import random
import subprocess
import tempfile
import unittest

from serve_fixture import KVTIER, Server

HERE = os.path.dirname(os.path.abspath(__file__))
CURVE_KEYS = os.path.join(HERE, "..", "..", "..", "tools", "curve-keys")

from kvtier_client import Client, ModelShape
from kvtier_client.driver import main as driver_main, read_mooncake, run_trace, trace_blocks

MODEL = ModelShape("llama3-8b", 32, 8, 128, "bf16")
CONFIG = ["--set", "cache.device_tokens=8192", "--set", "cache.host_tokens=12288",
          "--set", "cache.write_policy=write_through"]
SPEED = "500"


def make_trace(path, conversations=8, turns=5, gap_ms=200000, seed=7):
    rng = random.Random(seed)
    next_id = 0
    lines = []
    t = 0
    history = {}
    for turn in range(turns):
        for c in range(conversations):
            # The previous turn's last block was partial: its content changes as the next turn
            # fills it, so it gets a new id (as in the Mooncake traces); the full ones are kept.
            ids = history.get(c, [])[:-1]
            grow = rng.randint(1, 3)
            ids = ids + list(range(next_id, next_id + grow))
            next_id += grow
            history[c] = ids
            tail = rng.randint(1, 511)
            input_length = (len(ids) - 1) * 512 + tail
            lines.append({"timestamp": t, "input_length": input_length,
                          "output_length": rng.randint(2, 40), "hash_ids": ids})
            t += gap_ms
    with open(path, "w") as f:
        for rec in lines:
            f.write(json.dumps(rec) + "\n")
    return len(lines)


class DriverTest(unittest.TestCase):
    def test_blocks_split_like_kvtier(self):
        # Only full blocks are named: 512 tokens make 8, the second id's 188 tokens make 2, and
        # its last 60 tokens belong to no block.
        blocks = trace_blocks([5, 6], 700, 64)
        self.assertEqual([n for _, n in blocks], [64] * 10)
        self.assertEqual(len({h for h, _ in blocks}), 10)
        # Equal prefixes give equal blocks; a different parent gives a different block.
        self.assertEqual(trace_blocks([5, 7], 700, 64)[:8], blocks[:8])
        self.assertNotEqual(trace_blocks([4, 6], 700, 64)[8][0], blocks[8][0])
        # Merged, two 512-token ids fill a block; the third's 476 tokens fill none.
        merged = trace_blocks([1, 2, 3], 1500, 1024)
        self.assertEqual([n for _, n in merged], [1024])

    def test_bad_trace_is_exit_2_naming_the_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.jsonl")
            with open(path, "w") as f:
                f.write('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n')
                f.write('{"timestamp": 1, "input_length": 10, "output_length": 1}\n')
            self.assertEqual(driver_main(["--trace", path, "--endpoint", "tcp://127.0.0.1:1"]), 2)

    def test_hit_ratios_equal_the_wall_clock_replay(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "conv.jsonl")
            n = make_trace(trace)
            out = os.path.join(d, "replay")
            subprocess.run([KVTIER, "replay", "--clock", "wall", "--speed", SPEED, "--trace",
                            trace, "--quiet", "--out", out] + CONFIG, check=True, timeout=300)
            with open(os.path.join(out, "summary.json")) as f:
                replay = json.load(f)
            with Server(*CONFIG, "--speed", SPEED) as server:
                with Client(server.endpoint, timeout_ms=30000) as c:
                    c.hello(MODEL, 64, name="driver-test")
                    result = run_trace(c, read_mooncake(trace), 64, speed=float(SPEED))
                self.assertEqual(server.stop(), 0)
        self.assertEqual(result.finished, n)
        self.assertEqual(replay["requests"]["finished"], n)
        mine = result.ratios()
        theirs = replay["hit_ratio"]
        # The trace must exercise the tiers, or the equality would prove little.
        self.assertGreater(theirs["by_tier"]["host"]["blocks"], 0)
        self.assertGreater(theirs["by_tier"]["storage"]["blocks"], 0)
        self.assertGreater(replay["evictions"]["device"], 0)
        # summary.json rounds ratios to 6 decimals; the counts behind them must be equal.
        self.assertEqual(result.prompt_blocks, replay["requests"]["finished_blocks"])
        self.assertEqual(result.prompt_tokens, replay["requests"]["finished_input_tokens"])
        for tier in ("device", "host", "storage"):
            self.assertEqual(result.hit_blocks[tier], replay["hits"]["blocks"][tier], tier)
            self.assertEqual(result.hit_tokens[tier], replay["hits"]["tokens"][tier], tier)
        for key in ("blocks", "tokens"):
            self.assertEqual(round(mine[key], 6), theirs[key], key)

    def test_driver_over_curve(self):
        # Keys from files, as tools/curve-keys writes them; a file that holds no key is exit 2.
        with tempfile.TemporaryDirectory() as d:
            keys = subprocess.run([CURVE_KEYS, os.path.join(d, "server")],
                                  capture_output=True, text=True, check=True)
            self.assertNotIn(open(os.path.join(d, "server.key")).read().strip(), keys.stdout)
            trace = os.path.join(d, "conv.jsonl")
            n = make_trace(trace, conversations=2, turns=2)
            junk = os.path.join(d, "junk.pub")
            with open(junk, "w") as f:
                f.write("not a key\n")
            self.assertEqual(driver_main(["--trace", trace, "--curve-server-key-file", junk]), 2)
            out = os.path.join(d, "result.json")
            with Server(*CONFIG, "--speed", SPEED, "--curve-key-file",
                        os.path.join(d, "server.key")) as server:
                self.assertEqual(driver_main(["--trace", trace, "--endpoint", server.endpoint,
                                              "--no-pace", "--out", out,
                                              "--curve-server-key-file",
                                              os.path.join(d, "server.pub")]), 0)
                self.assertEqual(server.stop(), 0)
            with open(out) as f:
                self.assertEqual(json.load(f)["requests"]["finished"], n)


if __name__ == "__main__":
    unittest.main()
