"""Conformance of KvtierConnector with vLLM's connector contract, for both generations (vLLM
v0.11.0 and the newest commits read; docs/vllm.md), both roles, against a live ``kvtier serve``:
a request's whole life driven in each generation's call order (vllm_harness.py), every step
checked (``vllm_harness.Checker``). Each case is also run with a connector broken the way that
case guards against, and must fail: a harness that passes a broken connector proves nothing.
Runs under unittest (ctest) and pytest alike; about 5 s."""

import time
import unittest
from types import SimpleNamespace

from serve_fixture import Server
from vllm_harness import (CURRENT, GENERATIONS, REMOTE, RUNNING, V0_11_0, Checker, Engine,
                          Request, Spy)

from kvtier_client import Client, KvtierError, ModelShape, Prompt
from kvtier_client.vllm_base import KVConnectorRole
from kvtier_client.vllm_connector import KvtierConfigError, KvtierConnector, extra_keys_of

BS = 16
DEVICE_BLOCKS = 32
HOST_BLOCKS = 48
MODEL = {"name": "llama3-8b", "layers": 32, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16"}
# The device tier is vLLM's pool (kvtier's model of it); a host tier that keeps one filler and
# a prompt; storage keeps everything computed.
SERVER = ["--set", f"cache.block_size={BS}", "--set", f"cache.device_tokens={DEVICE_BLOCKS * BS}",
          "--set", f"cache.host_tokens={HOST_BLOCKS * BS}",
          "--set", "cache.write_policy=write_through", "--set", "cache.storage_write=always",
          "--set", "storage.capacity_tokens=1000000"]


def vllm_config(extra, gen, num_gpu_blocks=DEVICE_BLOCKS, layers=32):
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(kv_connector="KvtierConnector",
                                           kv_connector_module_path="kvtier_client.vllm_connector",
                                           kv_role="kv_both", kv_connector_extra_config=extra),
        cache_config=SimpleNamespace(block_size=BS, enable_prefix_caching=True,
                                     num_gpu_blocks=num_gpu_blocks, cache_dtype="auto"),
        model_config=SimpleNamespace(get_num_layers=lambda parallel: layers,
                                     get_num_kv_heads=lambda parallel: 8,
                                     get_head_size=lambda: 128, dtype="bfloat16"),
        parallel_config=SimpleNamespace())


def make_connector(cls, cfg, role, gen, groups=1):
    if gen is V0_11_0:  # v0.11.0's factory passes no KVCacheConfig
        return cls(cfg, role)
    kv_cache_config = SimpleNamespace(num_blocks=cfg.cache_config.num_gpu_blocks,
                                      kv_cache_groups=[object()] * groups)
    return cls(cfg, role, kv_cache_config)


_base = [int(time.time() * 1000) % 100000 * 1000]


def prompt(blocks, tail=3):
    """A prompt no earlier run of the server's storage tier saw."""
    _base[0] += 10000
    return list(range(_base[0], _base[0] + blocks * BS + tail))


class Case:
    """One kvtier serve and one vLLM engine of a generation, with a connector class."""

    def __init__(self, gen, cls=KvtierConnector):
        self.gen, self.cls = gen, cls
        self.server = Server(*SERVER)
        self.n = 0
        try:
            self.engine = self.make_engine()
        except BaseException:
            self.server.stop()
            raise

    def make_engine(self):
        extra = {"kvtier.endpoint": self.server.endpoint, "kvtier.model": MODEL}
        cfg = vllm_config(extra, self.gen)
        sched = make_connector(self.cls, cfg, KVConnectorRole.SCHEDULER, self.gen)
        worker = make_connector(self.cls, cfg, KVConnectorRole.WORKER, self.gen)
        self.spy = Spy(sched._client)
        self.checker = Checker(self.spy)
        return Engine(self.gen, sched, worker, DEVICE_BLOCKS, BS, checker=self.checker)

    def close(self):
        try:
            self.engine.sched.shutdown()
            self.engine.worker.shutdown()
        finally:
            code = self.server.stop()
        assert code == 0, f"kvtier serve exited {code}"

    def stats(self):
        with Client(self.server.endpoint) as c:
            return c.stats()

    def add(self, tokens, max_tokens=1):
        self.n += 1
        return self.engine.add(Request(f"r{self.n}", tokens, max_tokens=max_tokens))

    def run_until(self, done, steps=300, what="the engine got there"):
        for _ in range(steps):
            if done():
                return
            self.engine.step()
            time.sleep(0.001)
        raise AssertionError(f"{self.gen.name}: not after {steps} steps: {what}")

    def serve(self, tokens, max_tokens=1):
        """Runs a request to its end and the engine until it has nothing left to tell."""
        r = self.add(tokens, max_tokens)
        self.run_until(lambda: not self.engine.has_work(), what=f"{r.request_id} finished")
        self.quiet()
        return r

    def quiet(self):
        """Until kvtier's copies landed (they run on the wall clock)."""
        for _ in range(2000):
            if self.stats()["controller"]["copies_in_flight"] == 0:
                return
            time.sleep(0.005)
        raise AssertionError("kvtier's copies never landed")

    def held(self, tokens):
        with Client(self.server.endpoint) as c:
            c.hello(ModelShape(**MODEL), BS)
            h = c.lookup(Prompt(tokens=tokens))
            c.bye()
        return h.device_blocks, h.host_blocks, h.storage_blocks

    def evict_from_vllm(self, fillers=1):
        """Prompts as large as vLLM's pool: its allocator hands out every cached block again."""
        for _ in range(fillers):
            self.serve(prompt(DEVICE_BLOCKS - 1, tail=1))

    def all_released(self):
        """vLLM holds no request nor block, and kvtier no request."""
        e = self.engine
        self.run_until(lambda: not e.has_work() and not e.sched._reqs, steps=50,
                       what="vLLM and the connector released every request")
        assert e.kv.num_free() == DEVICE_BLOCKS, "vLLM's blocks not all free"
        for _ in range(200):
            if self.stats()["requests"] == 0:
                return
            time.sleep(0.005)
        raise AssertionError(f"kvtier still holds {self.stats()['requests']} requests")


# -- the cases ----------------------------------------------------------------------------------

def scheduled(r):
    """vLLM has scheduled it (it may have finished in that same step)."""
    return r.num_cached_tokens >= 0


def case_new_request(c):
    """A prompt nobody holds: offered nothing, admitted at kvtier in the step vLLM schedules it
    with the tokens that step computes, computed, finished."""
    r = c.add(prompt(24, tail=10), max_tokens=3)  # 394 tokens, computed whole in one step
    c.run_until(lambda: r.status == RUNNING)
    assert c.engine.matched[r.request_id] == 0
    c.run_until(lambda: r.request_id not in c.engine.requests)
    c.all_released()


def case_own_prefix_hit(c):
    """The same prompt again: vLLM's own prefix cache has its full blocks; kvtier offers none
    of them and is told vLLM's whole table."""
    tokens = prompt(4)
    c.serve(tokens)
    r = c.add(tokens)
    c.run_until(lambda: scheduled(r))
    assert c.engine.matched[r.request_id] == 0
    assert r.num_cached_tokens == 4 * BS, r.num_cached_tokens
    c.run_until(lambda: r.request_id not in c.engine.requests)
    c.all_released()


def case_host_hit(c):
    """vLLM dropped the prompt; kvtier holds it in host memory: loaded in the step vLLM
    schedules it, into vLLM's blocks at their positions."""
    tokens = prompt(4)
    c.serve(tokens)
    c.evict_from_vllm()
    assert c.held(tokens)[:2] == (0, 4), c.held(tokens)
    r = c.add(tokens)
    c.run_until(lambda: scheduled(r))
    assert c.engine.matched[r.request_id] == 4 * BS, c.engine.matched
    assert c.checker.checked_loads >= 4 and not c.engine.load_errors
    c.run_until(lambda: r.request_id not in c.engine.requests)
    c.all_released()


def to_storage(c, tokens):
    c.serve(tokens)
    c.evict_from_vllm(2)
    held = c.held(tokens)
    assert held[0] == 0 and held[2] > 0 and held[1] + held[2] == 4, held


def case_storage_hit(c):
    """kvtier holds the prompt in storage only: vLLM waits for it (WAITING_FOR_REMOTE_KVS)
    until the worker reports it in finished_recving, once."""
    tokens = prompt(4)
    to_storage(c, tokens)
    r = c.add(tokens)
    c.run_until(lambda: r.status == REMOTE)
    assert c.engine.matched[r.request_id] == 4 * BS
    c.run_until(lambda: scheduled(r))
    assert c.engine.recving_seen.count(r.request_id) == 1
    assert c.checker.checked_loads >= 4 and not c.engine.load_errors
    c.run_until(lambda: r.request_id not in c.engine.requests)
    c.all_released()


def case_preempted_resumed(c):
    """Preempted while decoding, resumed: kvtier releases it and admits it again with what
    vLLM computes then."""
    r = c.add(prompt(3), max_tokens=6)
    c.run_until(lambda: r.status == RUNNING and len(r.output_token_ids) >= 2)
    c.engine.preempt(r.request_id)
    c.run_until(lambda: r.num_preemptions == 1)
    c.run_until(lambda: r.status == RUNNING)
    c.run_until(lambda: r.request_id not in c.engine.requests)
    c.all_released()


def case_aborted_while_loading(c):
    """Aborted while vLLM waits for its storage load: the worker reports it in
    finished_recving, vLLM frees its blocks then, and kvtier releases it."""
    tokens = prompt(4)
    to_storage(c, tokens)
    r = c.add(tokens)
    c.run_until(lambda: r.status == REMOTE)
    c.engine.finish(r.request_id)
    assert r.request_id in c.engine.requests  # vLLM holds its blocks until it hears
    c.all_released()
    assert c.engine.recving_seen.count(r.request_id) == 1


def case_finished(c):
    """Finished: released on both sides; its blocks stay in kvtier's host tier."""
    tokens = prompt(4)
    r = c.serve(tokens)
    c.all_released()
    assert c.held(tokens)[0] + c.held(tokens)[1] == 4
    assert r.request_id not in c.engine.sched._reqs


def case_engine_restart(c):
    """vLLM restarts (new connectors, an empty device) beside the same kvtier serve: the old
    engine's requests are released at once, and what it computed is a host hit."""
    tokens = prompt(4)
    c.serve(tokens)
    c.add(prompt(2), max_tokens=50)  # left running: the restart must release it
    c.run_until(lambda: c.engine.requests and all(r.status == RUNNING
                                                  for r in c.engine.requests.values()))
    c.engine.sched.shutdown()
    c.engine.worker.shutdown()
    c.engine = c.make_engine()
    stats = c.stats()
    assert (stats["engines"], stats["requests"]) == (1, 0), stats
    r = c.add(tokens)
    c.run_until(lambda: scheduled(r))
    assert c.engine.matched[r.request_id] == 4 * BS, c.engine.matched
    c.run_until(lambda: r.request_id not in c.engine.requests)
    c.all_released()


CASES = [case_new_request, case_own_prefix_hit, case_host_hit, case_storage_hit,
         case_preempted_resumed, case_aborted_while_loading, case_finished, case_engine_restart]


# -- connectors that misbehave, one per case ----------------------------------------------------

class LateAdmission(KvtierConnector):
    """Admits a request one step after vLLM scheduled it (the lag this fixes)."""

    def build_connector_meta(self, out):
        late = [r for r in self._reqs.values() if r.admit_now and not getattr(r, "held", 0)]
        for r in late:
            r.admit_now, r.held = False, 1
        meta = super().build_connector_meta(out)
        for r in late:
            r.admit_now = True
        return meta


class DropsOwnPrefix(KvtierConnector):
    """Tells kvtier only the blocks after vLLM's own prefix."""

    def _add_admissions(self, work, scheduled):
        admitted = super()._add_admissions(work, scheduled)
        for req, r in admitted.items():
            local = r.offer[0] // self._block_size
            if local:
                work.admit_blocks[req] = work.admit_blocks[req][local:]
        return admitted


class DropsLoads(KvtierConnector):
    """Offers host hits, then neither loads them nor reports them failed."""

    def _settle(self, reply, admitted, meta):
        super()._settle(reply, admitted, meta)
        meta.loads.clear()
        meta.load_errors.clear()


class NeverReportsLoads(KvtierConnector):
    """Loads asynchronously and never says so in finished_recving."""

    def _settle(self, reply, admitted, meta):
        super()._settle(reply, admitted, meta)
        meta.async_loads.clear()
        meta.recv_done.clear()


class IgnoresPreemption(KvtierConnector):
    """Never tells kvtier of a preemption."""

    def _report(self, r, work, meta):
        r.preempted = r.preempted_now = False
        super()._report(r, work, meta)


class ForgetsAbortedLoads(KvtierConnector):
    """An abort while the load is pending is not reported in finished_recving."""

    def request_finished(self, request, block_ids):
        out = super().request_finished(request, block_ids)
        r = self._reqs.get(request.request_id)
        if r is not None:
            r.recv_owed = False
        return out


class NeverFinishes(KvtierConnector):
    """request_finished is ignored: kvtier keeps the request."""

    def request_finished(self, request, block_ids):
        return False, None


class NoBye(KvtierConnector):
    """Shuts down without saying bye: kvtier keeps the engine until it times out."""

    def shutdown(self):
        if self._client is not None:
            self._client.close()
            self._client = None


MUTANTS = {case_new_request: LateAdmission, case_own_prefix_hit: DropsOwnPrefix,
           case_host_hit: DropsLoads, case_storage_hit: NeverReportsLoads,
           case_preempted_resumed: IgnoresPreemption,
           case_aborted_while_loading: ForgetsAbortedLoads, case_finished: NeverFinishes,
           case_engine_restart: NoBye}


def run(case, gen, cls=KvtierConnector):
    c = Case(gen, cls)
    failed = True
    try:
        case(c)
        failed = False
    finally:
        try:
            c.close()
        except AssertionError:
            if not failed:
                raise


class ConformanceTest(unittest.TestCase):
    def test_every_case_both_generations(self):
        for gen in GENERATIONS:
            for case in CASES:
                with self.subTest(gen=gen.name, case=case.__name__):
                    run(case, gen)

    def test_each_case_fails_with_the_connector_broken_its_way(self):
        for i, case in enumerate(CASES):
            gen = GENERATIONS[i % 2]
            with self.subTest(gen=gen.name, case=case.__name__, mutant=MUTANTS[case].__name__):
                with self.assertRaises((AssertionError, KvtierError)):
                    run(case, gen, MUTANTS[case])


class BlockIdentityTest(unittest.TestCase):
    def test_a_block_vllm_hands_out_again_is_reported_evicted(self):
        # vLLM evicts a cached block only to hand its id out again, and tells no connector:
        # the connector reports the reused ids in the step that reuses them.
        for gen in GENERATIONS:
            with self.subTest(gen=gen.name):
                c = Case(gen)
                try:
                    tokens = prompt(4)
                    c.serve(tokens)
                    stored = set(c.engine.sched._stored)
                    self.assertEqual(len(stored), 4)
                    evicted = lambda: [b for w, _ in c.spy.all for b in w.evicted]
                    self.assertEqual(evicted(), [])
                    c.evict_from_vllm()
                    self.assertEqual(sorted(evicted()), sorted(stored))
                    # kvtier no longer counts them on vLLM's device; its host copies stay.
                    self.assertEqual(c.held(tokens)[:2], (0, 4))
                finally:
                    c.close()

    def test_extra_keys_isolate_lora_and_multimodal_items(self):
        plain = Request("p", [1, 2, 3])
        lora = Request("l", [1, 2, 3], lora_request=SimpleNamespace(lora_int_id=3,
                                                                   lora_name="x"))
        image = Request("i", [1, 2, 3], mm_features=[SimpleNamespace(identifier="img-hash")])
        self.assertEqual(extra_keys_of(plain), [])
        self.assertEqual(len(extra_keys_of(lora)), 1)
        self.assertNotEqual(extra_keys_of(image), extra_keys_of(lora))
        c = Case(CURRENT)
        try:
            tokens = prompt(4)
            c.serve(tokens)
            c.evict_from_vllm()
            r = c.engine.add(Request("lora", tokens, lora_request=SimpleNamespace(
                lora_int_id=7, lora_name="adapter-7")))
            c.run_until(lambda: r.num_cached_tokens >= 0)
            # The same tokens under an adapter match nothing, at vLLM or kvtier.
            self.assertEqual((c.engine.matched["lora"], r.num_cached_tokens), (0, 0))
            c.run_until(lambda: not c.engine.has_work())
        finally:
            c.close()


class ConfigTest(unittest.TestCase):
    """vLLM's config against kvtier's, refused at construction, naming the key."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*SERVER)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def extra(self):
        return {"kvtier.endpoint": self.server.endpoint, "kvtier.model": dict(MODEL)}

    def test_a_pool_other_than_kvtiers_device_tier_is_refused(self):
        cfg = vllm_config(self.extra(), CURRENT, num_gpu_blocks=DEVICE_BLOCKS * 2)
        with self.assertRaises(KvtierConfigError) as e:
            make_connector(KvtierConnector, cfg, KVConnectorRole.SCHEDULER, CURRENT)
        self.assertIn("cache.device_blocks", str(e.exception))
        self.assertIn(str(DEVICE_BLOCKS * 2), str(e.exception))

    def test_kvtier_model_other_than_vllms_is_refused(self):
        cfg = vllm_config(self.extra(), CURRENT, layers=28)
        with self.assertRaises(KvtierConfigError) as e:
            make_connector(KvtierConnector, cfg, KVConnectorRole.SCHEDULER, CURRENT)
        self.assertIn("kvtier.model.layers", str(e.exception))

    def test_kvtier_model_other_than_the_servers_is_refused(self):
        extra = self.extra()
        extra["kvtier.model"]["kv_heads"] = 4
        cfg = vllm_config(extra, V0_11_0)
        cfg.model_config = SimpleNamespace()  # nothing to compare on vLLM's side
        with self.assertRaises(KvtierConfigError) as e:
            make_connector(KvtierConnector, cfg, KVConnectorRole.SCHEDULER, V0_11_0)
        self.assertIn("model.kv_heads", str(e.exception))

    def test_the_hybrid_allocator_is_refused_clearly(self):
        cfg = vllm_config(self.extra(), CURRENT)
        with self.assertRaises(KvtierConfigError) as e:
            make_connector(KvtierConnector, cfg, KVConnectorRole.WORKER, CURRENT, groups=2)
        self.assertIn("--disable-hybrid-kv-cache-manager", str(e.exception))

    def test_the_new_hooks_have_answers_on_the_old_base_and_the_new(self):
        cfg = vllm_config(self.extra(), CURRENT)
        sched = make_connector(KvtierConnector, cfg, KVConnectorRole.SCHEDULER, CURRENT)
        self.addCleanup(sched.shutdown)
        self.assertFalse(sched.has_pending_push_work())
        self.assertFalse(sched.reset_cache())
        self.assertIsNone(sched.get_kv_connector_stats())  # nothing yet
        self.assertIsNone(sched.build_connector_worker_meta())
        sched.bind_gpu_block_pool(object())
        stats = KvtierConnector.build_kv_connector_stats({"loads": 2})
        self.assertEqual(stats.aggregate(KvtierConnector.build_kv_connector_stats(
            {"loads": 3})).reduce(), {"loads": 5})
        worker = make_connector(KvtierConnector, cfg, KVConnectorRole.WORKER, CURRENT)
        worker.handle_preemptions({"a"})  # the releases that pass the ids
        worker.handle_preemptions(SimpleNamespace(preempted={"b"}))  # those that pass metadata
        self.assertEqual(worker.preempted_seen, {"a", "b"})


if __name__ == "__main__":
    unittest.main()
