"""Conformance of KvtierConnector with vLLM v0.11.0's connector contract (docs/vllm.md): a
request's whole life driven in that release's scheduler call order (vllm_scheduler.py) against
``kvtier serve`` through protocol version 3, the engine-owned device tier. Runs under unittest
(ctest) and pytest alike."""

import time
import unittest
from types import SimpleNamespace

from serve_fixture import Server
from vllm_scheduler import (PREEMPTED, RUNNING, WAITING_FOR_REMOTE_KVS, MiniScheduler, Request,
                            vllm_config)

from kvtier_client import Client, ModelShape, Prompt
from kvtier_client.vllm_base import KVConnectorBase_V1, KVConnectorRole
from kvtier_client.vllm_connector import KvtierConnector, extra_keys_of

BS = 64
DEVICE_BLOCKS = 16
# Device and host tiers small enough that a few prompts push a prefix out of both, so that
# one prompt meets every tier; storage keeps what the host tier lets go.
SERVER = ["--set", f"cache.device_tokens={DEVICE_BLOCKS * BS}", "--set", "cache.host_tokens=2048",
          "--set", "storage.capacity_tokens=1000000", "--set", "cache.storage_write=always"]
MODEL = {"name": "llama3-8b", "layers": 32, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16"}


def prompt(first, blocks, tail=10):
    return list(range(first, first + blocks * BS + tail))


class ConnectorConformanceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(*SERVER)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"kvtier serve exited {code}")

    def make(self, lookup_wait_ms=0):
        extra = {"kvtier.endpoint": self.server.endpoint, "kvtier.model": MODEL,
                 "kvtier.lookup_wait_ms": lookup_wait_ms}
        cfg = vllm_config(extra, BS)
        sched = KvtierConnector(cfg, KVConnectorRole.SCHEDULER)
        worker = KvtierConnector(cfg, KVConnectorRole.WORKER, kv_cache_config=None)
        self.addCleanup(sched.shutdown)
        return sched, MiniScheduler(sched, worker, DEVICE_BLOCKS, BS)

    def run_until(self, s, done, steps=200, **kw):
        for _ in range(steps):
            if done():
                return
            s.step(**kw)
            time.sleep(0.002)
        self.fail("the scheduler did not get there")

    def held(self, tokens):
        """(device, host) blocks kvtier holds of the prompt, as an engine of version 1 sees."""
        with Client(self.server.endpoint) as c:
            c.hello(ModelShape(**MODEL), BS)
            hits = c.lookup(Prompt(tokens=tokens))
        return hits.device_blocks, hits.host_blocks, hits.storage_blocks

    def push_out(self, s, tier, first):
        """Serves prompts as long as the device pool (each pushes everything out of it) until
        vLLM's prefix cache has let the prefix go and kvtier holds it in host memory alone
        (``host``), or partly in storage (``storage``: a host tier lets a prefix go from its
        end). Each pool evicts on its own terms, kvtier's on the wall clock of its copies. A
        lookup counts as a use of what it finds: for storage, kvtier is asked every third
        prompt only."""
        every = 1 if tier == "host" else 3
        for i in range(1, 19):
            self.quiet()
            if i % every == 0 and not s._local_hits(Request("probe", prompt(1, 4))):
                held = self.held(prompt(1, 4))
                if held[0] == 0 and held[1] + held[2] == 4 and (held[2] > 0) == (tier != "host"):
                    return
            self.serve(s, Request(f"{tier}{first}-{i}",
                                  prompt(first + 10000 * i, DEVICE_BLOCKS - 1, tail=1)))
        self.fail(f"{tier} never held the prompt alone: {self.held(prompt(1, 4))}")

    def wait_held(self, tokens, tier):
        """Until ``tier`` holds the prompt's four blocks and no faster tier does: kvtier's
        copies land on the wall clock, after the step that computed the blocks."""
        with Client(self.server.endpoint) as c:
            c.hello(ModelShape(**MODEL), BS)
            for _ in range(1000):
                hits = c.lookup(Prompt(tokens=tokens))
                faster = hits.device_blocks + (hits.host_blocks if tier == "storage" else 0)
                if getattr(hits, f"{tier}_blocks") == 4 and faster == 0:
                    return
                time.sleep(0.01)
        self.fail(f"{tier} never held the prompt alone: {hits}")

    def quiet(self):
        """Until kvtier's copies have landed: its write policy's copies run on the wall clock,
        and a block still being copied is not evicted, which would change what the next
        prompts push out."""
        with Client(self.server.endpoint) as c:
            for _ in range(1000):
                if c.stats()["controller"]["copies_in_flight"] == 0:
                    return
                time.sleep(0.005)
        self.fail("kvtier's copies never landed")

    def serve(self, s, r):
        """Adds a request, runs it until it runs, one decode step, then finishes it."""
        s.add(r)
        self.run_until(s, lambda: r.status == RUNNING)
        s.step()
        self.quiet()
        self.assertEqual(s.finish(r.request_id), (False, None))
        s.step()
        self.quiet()

    def test_the_base_class_and_constructor_are_vllms(self):
        self.assertTrue(issubclass(KvtierConnector, KVConnectorBase_V1))
        cfg = vllm_config({"kvtier.model": MODEL}, BS)
        worker = KvtierConnector(cfg, KVConnectorRole.WORKER)  # no server needed
        self.assertEqual(worker.role, KVConnectorRole.WORKER)
        self.assertFalse(worker.has_connector_metadata())

    def test_a_requests_whole_life(self):
        sched, s = self.make()
        a = Request("a", prompt(1, 4))
        s.add(a)
        s.step()
        # New: the first answer is None (kvtier's lookup, which may ask storage, is out).
        self.assertIsNone(s.matched["a"])
        self.run_until(s, lambda: a.status == RUNNING)
        self.assertEqual(s.matched["a"], 0)  # nothing held yet
        s.step()
        self.quiet()
        self.assertEqual(s.finish("a"), (False, None))
        s.step()
        self.quiet()
        # The same prompt again: vLLM's own prefix cache has its four full blocks; kvtier
        # offers nothing beyond them (it never offers device blocks).
        b = Request("b", prompt(1, 4))
        self.serve(s, b)
        self.assertEqual(s.matched["b"], 0)
        # Other prompts push it out of vLLM's blocks and kvtier's model of the device (each
        # evicts least recently used first; the two pools need not let go at the same
        # prompt); kvtier keeps host copies: a partial hit of 4 of the prompt's 5 blocks,
        # loaded synchronously into vLLM's blocks.
        self.push_out(s, "host", 1000000)
        c = Request("c", prompt(1, 4))
        s.add(c)
        self.run_until(s, lambda: c.status == RUNNING)
        self.assertEqual(s.matched["c"], 4 * BS)
        for cache in s.caches.values():  # each loaded block holds its position's marker
            self.assertEqual([cache[blk][0] for blk in c.blocks[:4]], [1, 2, 3, 4])
        self.assertEqual(s.load_errors, set())
        # Preempted while running, then resumed: kvtier is told, nothing raises.
        s.preempt(c)
        self.assertEqual(c.status, PREEMPTED)
        self.run_until(s, lambda: c.status == RUNNING)
        s.step()
        self.assertEqual(s.finish("c"), (False, None))
        s.step()
        # LoRA isolation: the same tokens under an adapter match nothing, at vLLM or kvtier.
        d = Request("d", prompt(1, 4), lora_request=SimpleNamespace(lora_int_id=7,
                                                                   lora_name="adapter-7"))
        self.serve(s, d)
        self.assertEqual(s.matched["d"], 0)
        # Pending storage: enough prompts push the prefix (or its end) out of the host tier; kvtier
        # finds it in storage, vLLM loads it asynchronously (WAITING_FOR_REMOTE_KVS) until the
        # worker's get_finished reports it.
        self.push_out(s, "storage", 2000000)
        e = Request("e", prompt(1, 4))
        s.add(e)
        self.run_until(s, lambda: e.status == WAITING_FOR_REMOTE_KVS)
        self.assertEqual(s.matched["e"], 4 * BS)
        self.run_until(s, lambda: e.status == RUNNING)
        for cache in s.caches.values():
            self.assertEqual([cache[blk][0] for blk in e.blocks[:4]], [1, 2, 3, 4])
        s.step()
        self.assertEqual(s.finish("e"), (False, None))
        s.step()
        # Aborted while its storage load is pending: released without raising.
        self.push_out(s, "storage", 3000000)
        f = Request("f", prompt(1, 4))
        s.add(f)
        self.run_until(s, lambda: f.status == WAITING_FOR_REMOTE_KVS)
        self.assertEqual(s.finish("f"), (False, None))
        for _ in range(3):
            s.step()
        self.assertEqual(s.events, [])
        with Client(self.server.endpoint) as c:
            stats = c.stats()
        self.assertEqual(stats["controller"]["invariant_violations"], 0)

    def test_a_block_vllm_hands_out_again_is_reported_evicted(self):
        # vLLM v0.11.0 evicts a cached block only to hand its id out again, and tells no
        # connector: the connector reports the reused ids in the step that reuses them.
        sched, s = self.make()
        sent = []
        step = sched._client.step
        sched._client.step = lambda work: (sent.append(work), step(work))[1]
        # Prompts no earlier run stored (kvtier's storage tier outlives a server).
        first = 7000000 + int(time.time() * 1000) % 1000000 * 8
        a = Request("ev-a", prompt(first, 4))
        s.add(a)
        # Until kvtier was told its four full blocks are computed (an admission that waited for
        # kvtier's storage lookup reports them with a later step).
        self.run_until(s, lambda: len(sched._stored) == 4)
        self.quiet()
        self.assertEqual(s.finish("ev-a"), (False, None))
        s.step()
        stored = set(sched._stored)
        self.assertEqual([b for w in sent for b in w.evicted], [])
        # A prompt of the whole pool: vLLM's allocator takes a's cached blocks for it.
        self.serve(s, Request("ev-b", prompt(first + 4, DEVICE_BLOCKS - 1, tail=1)))
        self.assertEqual(sorted(b for w in sent for b in w.evicted), sorted(stored))
        # kvtier no longer counts them on the device (its model let them go, or the report did).
        self.assertEqual(self.held(prompt(first, 4))[0], 0)

    def test_extra_keys_mix_lora_and_multimodal_items(self):
        plain = Request("p", [1, 2, 3])
        lora = Request("l", [1, 2, 3], lora_request=SimpleNamespace(lora_int_id=3,
                                                                   lora_name="x"))
        image = Request("i", [1, 2, 3], mm_features=[SimpleNamespace(identifier="img-hash")])
        self.assertEqual(extra_keys_of(plain), [])
        self.assertEqual(len(extra_keys_of(lora)), 1)
        self.assertNotEqual(extra_keys_of(image), extra_keys_of(lora))


if __name__ == "__main__":
    unittest.main()
