"""Every verb of docs/protocol.md through the typed client, its errors, and the vLLM-style
connector, against a ``kvtier serve`` started on a free loopback port."""

import time
import unittest

import msgpack

from serve_fixture import Server

from kvtier_client import (Client, KvtierConnectorScheduler, KvtierError, ModelShape, Prompt,
                           StepWork)

MODEL = ModelShape("llama3-8b", 32, 8, 128, "bf16")
BS = 64
SMALL = ["--set", "cache.device_tokens=4096", "--set", "cache.host_tokens=16384"]


def prompt_hashes(first, n):
    return [first + i for i in range(n)]


class VerbsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(*SMALL)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"kvtier serve exited {code}")

    def client(self):
        c = Client(self.server.endpoint, timeout_ms=10000)
        self.addCleanup(c.close)
        return c

    def test_hello_and_every_verb(self):
        c = self.client()
        h = c.hello(MODEL, BS, name="unittest")
        self.assertEqual(h.version, 1)
        self.assertEqual(h.block_size, BS)
        self.assertEqual(h.device_blocks, 4096 // BS)
        self.assertIn("device", h.tiers)
        self.assertGreaterEqual(c.ping(), 0)
        hashes = prompt_hashes(1000, 4)
        self.assertEqual(c.lookup(Prompt(hashes=hashes)).blocks, 0)
        a = c.allocate(1, Prompt(hashes=hashes))
        if not a.ready:
            a = c.wait(1)
        self.assertTrue(a.ready)
        p = c.probe([1])
        self.assertEqual([m.req for m in p.matches], [1])
        s = c.step(StepWork(admits=[(1, 4 * BS)]))
        self.assertTrue(s.admits[0].admitted)
        self.assertEqual(s.admits[0].hits.blocks, 0)
        c.commit(1, 4 * BS)
        # Computed blocks are held on the device now: a lookup finds them all.
        self.assertEqual(c.lookup(Prompt(hashes=hashes)).device_blocks, 4)
        c.step(StepWork(grows=[(1, 4 * BS + 10)]))
        c.save(1, 4 * BS + 10)
        c.finish(1)
        # A second request sharing the prefix gets device hits at admission.
        if not c.allocate(2, Prompt(hashes=hashes[:3] + [77])).ready:
            c.wait(2)
        s = c.step(StepWork(admits=[(2, 4 * BS)]))
        self.assertEqual(s.admits[0].hits.device_blocks, 3)
        c.preempt(2)
        c.free(2)
        stats = c.stats()
        self.assertGreaterEqual(stats["calls"]["step"], 2)
        self.assertEqual(c.bye(), 0)

    def test_errors_name_what_was_wrong(self):
        c = self.client()
        with self.assertRaises(KvtierError) as e:
            c.lookup(Prompt(hashes=[1]))  # no hello: no engine
        self.assertIn(e.exception.kind, ("malformed", "not_registered"))
        self.assertIn("engine", e.exception.message)
        with self.assertRaises(KvtierError) as e:
            c.hello(ModelShape("other", 32, 8, 128, "bf16"), BS)
        self.assertEqual(e.exception.kind, "model_mismatch")
        self.assertIn("name", e.exception.message)
        with self.assertRaises(KvtierError) as e:
            c.call("nope")
        self.assertEqual(e.exception.kind, "unknown_op")
        with self.assertRaises(KvtierError) as e:
            c.call_raw(b"\xc1")
        self.assertEqual(e.exception.kind, "malformed")
        with self.assertRaises(KvtierError) as e:
            c.call_raw(msgpack.packb({"op": "lookup", "id": 5, "engine": 999, "hashes": [1]}), 5)
        self.assertEqual(e.exception.kind, "not_registered")
        with self.assertRaises(ValueError):
            Prompt(tokens=[1], hashes=[2]).to_wire()
        c.hello(MODEL, BS)  # still serving
        self.assertGreaterEqual(c.ping(), 0)


class MlaHelloTest(unittest.TestCase):
    def test_the_latent_is_checked_naming_the_key(self):
        mla = ["--set", "model.kv_lora_rank=512", "--set", "model.rope_head_dim=64"]
        with Server(*SMALL, *mla) as server:
            shape = ModelShape("llama3-8b", 32, 1, 576, "bf16", kv_lora_rank=512, rope_head_dim=64)
            self.assertEqual(shape.to_wire()["latent_dim"], 576)
            with Client(server.endpoint, timeout_ms=10000) as c:
                self.assertEqual(c.hello(shape, BS).block_size, BS)
            with Client(server.endpoint, timeout_ms=10000) as c:
                with self.assertRaises(KvtierError) as e:
                    c.hello(ModelShape("llama3-8b", 32, 1, 576, "bf16", kv_lora_rank=448,
                                       rope_head_dim=128), BS)
                self.assertEqual(e.exception.kind, "model_mismatch")
                self.assertIn("model.kv_lora_rank is 448, the server's is 512",
                              e.exception.message)


class EngineIsolationTest(unittest.TestCase):
    def test_an_engine_answers_only_its_own_connection(self):
        with Server(*SMALL) as server:
            with Client(server.endpoint, timeout_ms=10000) as a, \
                    Client(server.endpoint, timeout_ms=10000) as intruder:
                a.hello(MODEL, BS)
                if not a.allocate(1, Prompt(hashes=prompt_hashes(10, 2))).ready:
                    a.wait(1)
                intruder.engine = a.engine  # never said hello: it only guesses the id
                with self.assertRaises(KvtierError) as e:
                    intruder.finish(1)
                self.assertEqual(e.exception.kind, "not_registered")
                self.assertIn("another connection", e.exception.message)
                self.assertEqual(a.stats()["requests"], 1)
                a.finish(1)
            self.assertEqual(server.stop(), 0)

    def test_ping_keeps_the_engine_alive(self):
        with Server(*SMALL, "--set", "serve.client_timeout_s=1") as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                if not c.allocate(1, Prompt(hashes=prompt_hashes(20, 2))).ready:
                    c.wait(1)
                deadline = time.monotonic() + 2.5
                while time.monotonic() < deadline:
                    c.ping()
                    time.sleep(0.1)
                stats = c.stats()
                self.assertEqual((stats["engines"], stats["requests"]), (1, 1))
            self.assertEqual(server.stop(), 0)

    def test_steps_and_shorthands_share_one_counter(self):
        with Server(*SMALL) as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                for req in (1, 2):
                    if not c.allocate(req, Prompt(hashes=prompt_hashes(100 * req, 2))).ready:
                        c.wait(req)
                self.assertEqual(c.step(StepWork(admits=[(1, 2 * BS)])).step, 1)
                self.assertEqual(c.step(StepWork(admits=[(2, 2 * BS)])).step, 2)
                self.assertEqual(c.commit(1, 2 * BS).step, 3)
                with self.assertRaises(KvtierError) as e:
                    c.call("step", step=3)
                self.assertEqual(e.exception.kind, "bad_request")
                self.assertIn("step 3 does not follow step 3", e.exception.message)
            self.assertEqual(server.stop(), 0)

    def test_an_op_that_is_not_utf8_gets_a_decodable_error(self):
        with Server(*SMALL) as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                with self.assertRaises(KvtierError) as e:
                    c.call_raw(b"\x82\xa2op\xa2\xff\xfe\xa2id\x07", 7)
                self.assertEqual(e.exception.kind, "unknown_op")
                self.assertEqual(e.exception.message, "unknown op '\\xff\\xfe'")
            self.assertEqual(server.stop(), 0)


class FakeRequest:
    def __init__(self, request_id, tokens):
        self.request_id = request_id
        self.prompt_token_ids = tokens


def ask_until_ready(conn, request, computed):
    """vLLM asks again every step while the answer is None (storage still being asked)."""
    for _ in range(500):
        n, is_async = conn.get_num_new_matched_tokens(request, computed)
        if n is not None:
            return n, is_async
        time.sleep(0.01)
    raise AssertionError("the allocation stayed pending")


class FakeSchedulerOutput:
    def __init__(self, scheduled, finished=()):
        self.num_scheduled_tokens = dict(scheduled)
        self.finished_req_ids = set(finished)


class ConnectorTest(unittest.TestCase):
    def test_scheduler_side_methods_drive_the_server(self):
        with Server(*SMALL) as server:
            c = Client(server.endpoint, timeout_ms=10000)
            c.hello(MODEL, BS)
            conn = KvtierConnectorScheduler(c)
            tokens = list(range(1, 4 * BS + 1))  # four full blocks
            a = FakeRequest("a", tokens)
            n, is_async = ask_until_ready(conn, a, 0)
            self.assertEqual((n, is_async), (0, False))
            conn.update_state_after_alloc(a, None, 0)
            meta = conn.build_connector_meta(FakeSchedulerOutput({"a": len(tokens)}))
            self.assertIn("a", meta.loads)
            self.assertEqual(meta.loads["a"].blocks, 0)
            # Next step: the prompt is computed (reported now); then it finishes.
            conn.build_connector_meta(FakeSchedulerOutput({"a": 1}))
            self.assertEqual(conn.request_finished(a, []), (False, None))
            # The same prompt again: kvtier holds it all on the device; the engine's own prefix
            # cache has none of it in this test (num_computed_tokens 0), so kvtier offers all
            # but the one token that must be computed.
            b = FakeRequest("b", tokens)
            n, _ = ask_until_ready(conn, b, 0)
            self.assertEqual(n, len(tokens) - 1)
            n, _ = conn.get_num_new_matched_tokens(b, 2 * BS)
            self.assertEqual(n, len(tokens) - 1 - 2 * BS)
            b.num_computed_tokens = 2 * BS  # the engine's own prefix cache had two blocks
            conn.update_state_after_alloc(b, None, n)
            meta = conn.build_connector_meta(FakeSchedulerOutput({"b": 1}))
            self.assertEqual(meta.loads["b"].device_blocks, 4)
            conn.build_connector_meta(FakeSchedulerOutput({}, finished={"b"}))
            self.assertEqual(c.stats()["requests"], 0)
            c.close()
            self.assertEqual(server.stop(), 0)



class CurveTest(unittest.TestCase):
    """``kvtier serve --curve-key-file``: the client's calls travel encrypted (ZeroMQ CURVE); a
    plaintext client, one with another server key and one whose key is not listed are refused
    at the handshake and counted (``stats``: ``refused_connections``); no secret is printed."""

    TOKEN = "tok-5d1e-not-printed"

    @classmethod
    def setUpClass(cls):
        import os
        import tempfile
        import zmq
        cls.dir = tempfile.mkdtemp(prefix="kvtier-curve-")
        cls.server_public, cls.server_secret = zmq.curve_keypair()
        cls.listed_public, cls.listed_secret = zmq.curve_keypair()
        cls.paths = {}
        for name, key in (("server.key", cls.server_secret), ("server.pub", cls.server_public),
                          ("engine.key", cls.listed_secret)):
            cls.paths[name] = os.path.join(cls.dir, name)
            with open(cls.paths[name], "wb") as f:
                f.write(key + b"\n")
        cls.paths["clients"] = os.path.join(cls.dir, "clients")
        with open(cls.paths["clients"], "wb") as f:
            f.write(b"# engines admitted\n" + cls.listed_public + b"\n")
        cls.server = Server(*SMALL, "--token", cls.TOKEN, "--curve-key-file",
                            cls.paths["server.key"], "--curve-clients-file", cls.paths["clients"],
                            metrics=True)

    @classmethod
    def tearDownClass(cls):
        import shutil
        code = cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        if code != 0:
            raise AssertionError(f"kvtier serve exited {code}")

    def test_curve_calls_work_and_strangers_are_refused_and_counted(self):
        import zmq
        good = Client(self.server.endpoint, token=self.TOKEN, timeout_ms=10000,
                      server_key=self.paths["server.pub"],
                      client_secret_key=self.paths["engine.key"])
        self.addCleanup(good.close)
        hello = good.hello(MODEL, BS, name="curve")
        self.assertEqual(hello.block_size, BS)
        good.ping()
        strangers = [
            Client(self.server.endpoint, token=self.TOKEN, timeout_ms=1500),  # plaintext
            Client(self.server.endpoint, token=self.TOKEN, timeout_ms=1500,
                   server_key=zmq.curve_keypair()[0]),  # another server's key
            Client(self.server.endpoint, token=self.TOKEN, timeout_ms=1500,
                   server_key=self.server_public),  # a fresh key, not listed
        ]
        for s in strangers:
            self.addCleanup(s.close)
            with self.assertRaises(TimeoutError):
                s.ping()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            refused = good.stats()["refused_connections"]
            if refused >= 3:
                break
            time.sleep(0.1)
        self.assertGreaterEqual(refused, 3)
        import re
        import urllib.request
        url = f"http://127.0.0.1:{self.server.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        m = re.search(r"^kvtier_refused_connections_total (\S+)$", text, re.M)
        self.assertIsNotNone(m, text)
        self.assertGreaterEqual(float(m.group(1)), 3)
        # A wrong token over CURVE is refused too, by the server itself.
        wrong = Client(self.server.endpoint, token="not-the-token", timeout_ms=10000,
                       server_key=self.paths["server.pub"],
                       client_secret_key=self.paths["engine.key"])
        self.addCleanup(wrong.close)
        with self.assertRaises(KvtierError) as e:
            wrong.ping()
        self.assertEqual(e.exception.kind, "unauthorized")
        printed = "".join(self.server.lines)
        self.assertIn(self.server_public.decode(), printed)
        for secret in (self.TOKEN, self.server_secret.decode(), self.listed_secret.decode()):
            self.assertNotIn(secret, printed)


if __name__ == "__main__":
    unittest.main()
