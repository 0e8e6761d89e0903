#!/usr/bin/python3
"""Hand-worked cases of the reference model (tools/reference/kvtier_ref.py). Each test says
what the rule is and works the expected figures out by hand in its comment. Runs in about a
second: /usr/bin/python3 -m unittest -v test_kvtier_ref (from this folder)."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvtier_ref as ref  # noqa: E402


def native(lines, block_size=4, scope="file"):
    """A native trace's text: a header, then one request per (input, hashes-or-tokens) tuple."""
    out = [json.dumps({"kvtier_trace": 1, "block_size": block_size, "hash_scope": scope})]
    for k, (tokens, ident) in enumerate(lines):
        line = {"arrival_s": k * 0.5, "input_length": tokens, "output_length": 1}
        if ident is not None:
            line["tokens" if isinstance(ident, tuple) else "block_hashes"] = list(ident)
        out.append(json.dumps(line))
    return "\n".join(out) + "\n"


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, text, name="t.jsonl"):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_model(self, traces, *sets):
        """Replays trace texts (4-token cache blocks unless set) and returns rows, summary."""
        config = ref.load_config(None, ("cache.block_size=4",) + sets)
        paths = [self.write(t, "t%d.jsonl" % i) for i, t in enumerate(traces)]
        return ref.replay(ref.read_traces(paths, config), config, check_every=1)

    @staticmethod
    def hits(row):
        return (row["device_hit_blocks"], row["host_hit_blocks"], row["storage_hit_blocks"])


class FullHit(Case):
    def test_last_block_of_a_device_full_hit_is_computed(self):
        # [1,2] of 8 tokens twice: the second finds both blocks, but they cover the whole
        # prompt, so the last is computed: 1 hit block, 4 hit tokens + 4 computed = 8.
        rows, s = self.run_model([native([(8, [1, 2]), (8, [1, 2])])])
        self.assertEqual(self.hits(rows[1]), (1, 0, 0))
        self.assertEqual(rows[1]["device_hit_tokens"], 4)
        self.assertEqual(s["transfers"]["swap_ins"], 0)

    def test_last_block_of_a_host_full_hit_is_not_swapped_in(self):
        # device 2, host 4: [1,2]; [3]+tail evicts block 2 (the leaf) to host; [1,2] again
        # finds 1 on device and 2 on host, a full hit: 2 is computed, not swapped in.
        rows, s = self.run_model([native([(8, [1, 2]), (5, [3]), (8, [1, 2])])],
                                 "cache.device_blocks=2", "cache.host_blocks=4",
                                 "storage.capacity_blocks=0")
        self.assertEqual(self.hits(rows[2]), (1, 0, 0))
        self.assertEqual(s["transfers"]["swap_ins"], 0)

    def test_last_block_of_a_storage_full_hit_is_not_loaded(self):
        # device 2, host 2, storage 10, write_through + storage_write=always: [1,2] is backed
        # up and stored; [7,8] evicts 2 then 1 to host, and its backups evict them from host.
        # [1,2] again: both in storage, a full hit: 1 is loaded (a storage hit), 2 computed.
        rows, s = self.run_model([native([(8, [1, 2]), (8, [7, 8]), (8, [1, 2])])],
                                 "cache.device_blocks=2", "cache.host_blocks=2",
                                 "storage.capacity_blocks=10")
        self.assertEqual(self.hits(rows[2]), (0, 0, 1))
        self.assertEqual(rows[2]["storage_hit_tokens"], 4)
        self.assertEqual(s["transfers"]["storage_loads"], 1)
        self.assertEqual(s["transfers"]["swap_ins"], 1)


class HostTier(Case):
    def test_write_through_host_smaller_than_device_keeps_the_device_cache(self):
        # device 8 blocks holds both 3-block prompts; their second turns are 3 device hits
        # each whatever the host: a host smaller than the device never evicts device blocks.
        trace = native([(13, [1, 2, 3]), (13, [4, 5, 6]), (13, [1, 2, 3]), (13, [4, 5, 6])])
        for host in (0, 1, 2, 3, 8, 20):
            rows, s = self.run_model([trace], "cache.device_blocks=8", "cache.host_blocks=%d" % host,
                                     "storage.capacity_blocks=0")
            self.assertEqual([self.hits(r) for r in rows[2:]], [(3, 0, 0), (3, 0, 0)], host)
            self.assertEqual(s["evictions"]["device"], 0, host)
            self.assertEqual(s["occupancy"]["device_blocks"], 6, host)

    def test_adding_host_memory_never_costs_hits(self):
        # device 2, prompts A, B, C, A (one block and a tail each). Host 0: C evicts A: 0 hits.
        # Host 1 (< device): A is backed up, B's backup takes A's copy (A stays on the
        # device), C evicts A (no copy: dropped), C's backup takes B's copy: 0. Host 2: A and B backed up,
        # C's backup evicts A again: 0. Host 3: C's backup has room, A stays: 1 host hit.
        trace = native([(5, [1]), (5, [2]), (5, [3]), (5, [1])])
        totals = []
        for host in range(0, 6):
            rows, _ = self.run_model([trace], "cache.device_blocks=2", "cache.host_blocks=%d" % host,
                                     "storage.capacity_blocks=0")
            totals.append(sum(sum(self.hits(r)) for r in rows))
        self.assertEqual(totals, [0, 0, 0, 1, 1, 1])

    def test_write_back_moves_victims_and_frees_swapped_in_copies(self):
        # device 1, host 2: A, B, A, B. B evicts A: written back (1). A is a host hit; its
        # device block evicts B, written back (2); the swap-in frees A's host copy
        # (free_on_swap_in). B's hit evicts A again, which has no copy now: written back (3).
        trace = native([(5, [1]), (5, [2]), (5, [1]), (5, [2])])
        common = ("cache.device_blocks=1", "cache.host_blocks=2", "storage.capacity_blocks=0",
                  "cache.write_policy=write_back")
        rows, s = self.run_model([trace], *common)
        self.assertEqual([self.hits(r) for r in rows[2:]], [(0, 1, 0), (0, 1, 0)])
        self.assertEqual((s["transfers"]["write_backs"], s["transfers"]["swap_ins"]), (3, 2))
        # keep: A's host copy stays, so its second eviction moves nothing: 2 write-backs.
        rows, s = self.run_model([trace], *common, "cache.write_back_host_copy=keep")
        self.assertEqual([self.hits(r) for r in rows[2:]], [(0, 1, 0), (0, 1, 0)])
        self.assertEqual((s["transfers"]["write_backs"], s["transfers"]["swap_ins"]), (2, 2))
        # host 1: the allocation that swaps A in comes first, and A (held) fills the host:
        # B is dropped uncopied, so B's second turn misses.
        rows, s = self.run_model([trace], *common[:1], "cache.host_blocks=1", *common[2:])
        self.assertEqual([self.hits(r) for r in rows[2:]], [(0, 1, 0), (0, 0, 0)])

    def test_selective_backs_up_at_the_threshold(self):
        # write_through_selective, threshold 2: [1]+tail is computed (hit count 1, no copy),
        # hit once (2: backed up then). Device 1 then evicts it to host, where A hits.
        trace = native([(5, [1]), (5, [1]), (5, [2]), (5, [1])])
        rows, s = self.run_model([trace], "cache.device_blocks=1", "cache.host_blocks=4",
                                 "storage.capacity_blocks=0", "cache.write_policy=write_through_selective")
        self.assertEqual([self.hits(r) for r in rows], [(0, 0, 0), (1, 0, 0), (0, 0, 0), (0, 1, 0)])
        self.assertEqual(s["transfers"]["backups"], 1)

    def test_a_request_longer_than_the_device_passes_through_it(self):
        # device 2: a 4-block prompt keeps blocks 1-2 on the device; 3-4 are uncached and
        # reach the host tier as blocks leaving the device do (write_through: a host copy).
        rows, s = self.run_model([native([(17, [1, 2, 3, 4]), (17, [1, 2, 3, 4])])],
                                 "cache.device_blocks=2", "cache.host_blocks=10",
                                 "storage.capacity_blocks=0")
        self.assertEqual(rows[0]["uncached_blocks"], 2)
        self.assertEqual(self.hits(rows[1]), (2, 2, 0))
        self.assertEqual(s["uncached_blocks"], 4)


class Eviction(Case):
    def test_lru_and_lfu_pick_different_victims(self):
        # device 2: A, A, B, C, A. At C, LRU evicts A (released before B); LFU evicts B
        # (hit count 1 against A's 2). So the last A hits only under LFU.
        trace = native([(5, [1]), (5, [1]), (5, [2]), (5, [3]), (5, [1])])
        for order, expected in (("lru", (0, 0, 0)), ("lfu", (1, 0, 0))):
            rows, _ = self.run_model([trace], "cache.device_blocks=2", "cache.host_blocks=0",
                                     "storage.capacity_blocks=0", "cache.eviction=" + order)
            self.assertEqual(self.hits(rows[4]), expected, order)

    def test_leaves_only_tail_first(self):
        # device 3: [1,2] then [3,4]: one eviction, the leaf 2, not the older-looking root 1.
        rows, _ = self.run_model([native([(9, [1, 2]), (9, [3, 4]), (9, [1, 2])])],
                                 "cache.device_blocks=3", "cache.host_blocks=0",
                                 "storage.capacity_blocks=0")
        self.assertEqual(self.hits(rows[2]), (1, 0, 0))

    def test_storage_matches_its_leading_run_only(self):
        config = ref.load_config(None, ["cache.block_size=4"])
        request = ref.read_traces([self.write(native([(13, [1, 2, 3])]))], config)[0]
        model = ref.Model(config)
        names = model.name_blocks(ref.block_contents(request, 4))
        model.storage = {names[0]: 1, names[2]: 2}      # block 2 is missing
        self.assertEqual(model.process(request)["storage"], 1)


class Naming(Case):
    def test_block_size_mapping(self):
        # 20 tokens in three 8-token trace blocks (the last partial, 4 tokens): 4-token cache
        # blocks split them 2 + 2 + 1; 16-token ones merge the two full ones into 1 block.
        trace = native([(20, [1, 2, 3]), (20, [1, 2, 9])], block_size=8)
        rows, _ = self.run_model([trace])
        self.assertEqual([r["blocks"] for r in rows], [5, 5])
        self.assertEqual(self.hits(rows[1]), (4, 0, 0))
        rows, _ = self.run_model([trace], "cache.block_size=16")
        self.assertEqual([r["blocks"] for r in rows], [1, 1])
        self.assertEqual(self.hits(rows[1]), (1, 0, 0))
        with self.assertRaisesRegex(ref.RefError, "multiple"):
            self.run_model([trace], "cache.block_size=3")

    def test_identity_spaces(self):
        hashes = native([(9, [5, 6])])
        self.assertEqual(self.hits(self.run_model([hashes, hashes])[0][1]), (0, 0, 0))
        shared = native([(9, [5, 6])], scope="global")
        self.assertEqual(self.hits(self.run_model([shared, shared])[0][1]), (2, 0, 0))
        tokens = native([(9, tuple(range(9)))])
        self.assertEqual(self.hits(self.run_model([tokens, tokens])[0][1]), (2, 0, 0))
        # no identity: floor(9 / 4) blocks of its own, never shared
        rows, _ = self.run_model([native([(9, None), (9, None)])])
        self.assertEqual((rows[1]["blocks"], self.hits(rows[1])), (2, (0, 0, 0)))

    def test_mooncake_and_merge_order(self):
        moon = "\n".join(json.dumps({"timestamp": t, "input_length": 600, "output_length": 1,
                                     "hash_ids": [7, 8]}) for t in (0, 1000)) + "\n"
        rows, _ = self.run_model([moon, native([(9, [7, 8])])], "cache.block_size=64")
        # 600 tokens: 8 blocks of trace block 7, 1 of the 88-token partial block 8
        self.assertEqual([(r["file"], r["line"], r["blocks"]) for r in rows],
                         [(0, 1, 9), (1, 2, 0), (0, 2, 9)])
        self.assertEqual(self.hits(rows[2]), (9, 0, 0))

    def test_sessions_are_read_and_checked(self):
        text = native([(9, [1, 2])]).replace('"output_length": 1', '"output_length": 1, "session": "a"')
        text += json.dumps({"arrival_s": 2, "input_length": 9, "output_length": 1,
                            "block_hashes": [1, 2], "session": "a", "think_time_s": 0.5}) + "\n"
        config = ref.load_config(None, ["cache.block_size=4"])
        requests = ref.read_traces([self.write(text)], config)
        self.assertEqual([(r.session, r.turn) for r in requests], [((1 << 32) | 1, 0), ((1 << 32) | 1, 1)])
        bad = native([(9, [1, 2])]).replace('"output_length": 1', '"output_length": 1, "think_time_s": 1')
        with self.assertRaisesRegex(ref.RefError, "think_time_s"):
            ref.read_traces([self.write(bad)], config)


class Config(Case):
    def test_no_caching_baseline(self):
        rows, s = self.run_model([native([(9, [1, 2]), (9, [1, 2])])], "cache.prefix_caching=false")
        self.assertEqual(self.hits(rows[1]), (0, 0, 0))
        self.assertEqual(sum(s["transfers"].values()) + s["occupancy"]["tree_nodes"], 0)

    def test_refusals_and_pairs(self):
        for key in ("storage.nodes=2", "scheduler.preemption=swap_to_host", "cache.output_caching=true"):
            with self.assertRaisesRegex(ref.RefError, key.split("=")[0]):
                ref.load_config(None, [key])
        config = ref.load_config(None, ["cache.device_tokens=640", "cache.device_blocks=3"])
        self.assertEqual((config["cache"]["device_tokens"], config["cache"]["device_blocks"]), (None, 3))
        for sets in (["cache.device_blocks=0"], ["cache.host_blocks=0"]):
            with self.assertRaises(ref.RefError):
                ref.Model(ref.load_config(None, sets))

    def test_command_line(self):
        trace = self.write(native([(9, [1, 2])]))
        out = os.path.join(self.dir.name, "out")
        self.assertEqual(ref.main(["--trace", trace, "--set", "cache.block_size=4",
                                   "--set", "trace.time_scale=3", "--out", out]), 0)
        with open(os.path.join(out, "requests.csv")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0].split(","), ref.CSV_COLUMNS)
        self.assertEqual(lines[1], "0,0,2,0.000000,9,1,2,0,0,0,0,0,0,0")
        self.assertEqual(ref.main(["--trace", trace, "--set", "faults.down_s=1", "--out", out]), 2)

    def test_the_checker_fires_on_corrupted_state(self):
        config = ref.load_config(None, ["cache.block_size=4"])
        model = ref.Model(config)
        model.process(ref.read_traces([self.write(native([(9, [1, 2])]))], config)[0])
        model.check()
        next(iter(model.nodes.values())).device = False     # a device child under no copy
        with self.assertRaises(AssertionError):
            model.check()


if __name__ == "__main__":
    unittest.main()
