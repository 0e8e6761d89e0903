"""KV events and metrics of a running kvtier serve: a follower of the events knows what the
server holds per tier, and /metrics counts what was asked."""

import re
import shutil
import subprocess
import unittest
import urllib.request

from serve_fixture import KVTIER, Server

from kvtier_client import Client, EventSubscriber, ModelShape, Prompt, StepWork, TierIndex
from kvtier_client.events import wait_for
from router_decoders import free_endpoint

MODEL = ModelShape("llama3-8b", 32, 8, 128, "bf16")
BS = 64
# 16 device blocks and 48 host blocks: a handful of prompts evicts to host and back.
SMALL = ["--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=3072",
         "--set", "cache.write_policy=write_through"]


def serve_prompt(c, req, hashes, output_tokens=10):
    if not c.allocate(req, Prompt(hashes=hashes)).ready:
        c.wait(req)
    reply = c.step(StepWork(admits=[(req, len(hashes) * BS)]))
    assert reply.admits[0].admitted, reply
    c.step(StepWork(computed=[(req, len(hashes) * BS)],
                    grows=[(req, len(hashes) * BS + output_tokens)]))
    c.finish(req)
    return reply.admits[0].hits


class EventsTest(unittest.TestCase):
    def test_a_follower_knows_what_each_tier_holds(self):
        with Server(*SMALL, events=True) as server:
            sub = EventSubscriber(server.events, server.replay, start_seq=0)
            self.addCleanup(sub.close)
            index = TierIndex()
            seqs = []
            prompts = [[1000 * p + i for i in range(6)] for p in range(6)]
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                for req, hashes in enumerate(prompts + prompts[:2], 1):
                    serve_prompt(c, req, hashes)

                def agrees():
                    for b in sub.poll(50):
                        index.apply(b)
                        seqs.append(b.seq)
                    for hashes in prompts:
                        hits = c.lookup(Prompt(hashes=hashes))
                        # The events carry the engine's own hashes.
                        if index.prefix_blocks(hashes, "GPU") != hits.device_blocks:
                            return False
                        rest = hashes[hits.device_blocks:]
                        if index.prefix_blocks(rest, "CPU") != hits.host_blocks:
                            return False
                    return True

                self.assertTrue(wait_for(agrees, 20), f"index {index.blocks}")
                # The small device evicted: some prompt lives on the host only.
                self.assertTrue(index.held("CPU") - index.held("GPU"))
                self.assertEqual(sub.lost, 0)
                # The run's first batch (AllBlocksCleared) came through replay, asked from 0;
                # every batch came live or through replay, in order, none twice.
                self.assertEqual(sub.restarts, 1)
                self.assertEqual(index.cleared, 1)
                self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
                self.assertEqual(len(seqs), sub.received + sub.replayed)
            self.assertEqual(server.stop(), 0)

    def test_a_follower_starts_over_when_the_server_restarts(self):
        pub, replay = free_endpoint(), free_endpoint()
        index = TierIndex()
        sub = EventSubscriber(pub, replay, start_seq=0)
        self.addCleanup(sub.close)
        first, second = [1, 2, 3, 4], [7, 8, 9]

        def follow_until(c, done):
            fillers = iter(range(100, 10 ** 6))

            def step():
                # A follower learns of batches from live ones: keep them coming until the
                # subscription has reached the new publisher.
                req = next(fillers)
                serve_prompt(c, req, [10 ** 6 * req])
                for b in sub.poll(50):
                    index.apply(b)
                return done()
            return wait_for(step, 20)

        with Server(*SMALL, events=(pub, replay)) as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                serve_prompt(c, 1, first)
                self.assertTrue(follow_until(c, lambda: index.prefix_blocks(first, "GPU") == 4))
            self.assertEqual(server.stop(), 0)
        before = sub.next_seq
        with Server(*SMALL, events=(pub, replay)) as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                serve_prompt(c, 1, second)
                # The new run's numbers go on above the old ones and its first batch clears
                # what the follower held: the first prompt is gone, the second is there.
                self.assertTrue(follow_until(c, lambda: index.prefix_blocks(second, "GPU") == 3))
            self.assertEqual(index.prefix_blocks(first, "GPU"), 0)
            self.assertGreater(sub.next_seq, before)
            self.assertEqual((index.cleared, sub.restarts, sub.lost), (2, 2, 0))
            self.assertEqual(server.stop(), 0)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def sample(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = r"(?m)^" + re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") \
        + r" (\S+)$"
    m = re.search(pattern, text)
    if not m:
        raise AssertionError(f"no sample {name}{{{want}}} in\n{text}")
    return float(m.group(1))


class MetricsTest(unittest.TestCase):
    def test_metrics_count_calls_tiers_and_errors(self):
        with Server(*SMALL, metrics=True) as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                for req in range(1, 6):
                    serve_prompt(c, req, [100 * req + i for i in range(6)])
                for _ in range(3):
                    c.lookup(Prompt(hashes=[101, 102, 103]))
                try:
                    c.call("nope")
                except Exception:
                    pass
                text = scrape(server.metrics_port)
            self.assertEqual(sample(text, "kvtier_calls_total", verb="lookup"), 3)
            self.assertEqual(sample(text, "kvtier_calls_total", verb="allocate"), 5)
            self.assertEqual(sample(text, "kvtier_call_duration_seconds_count", verb="lookup"), 3)
            self.assertEqual(sample(text, "kvtier_call_duration_seconds_bucket", verb="lookup",
                                    le="+Inf"), 3)
            self.assertEqual(sample(text, "kvtier_errors_total", kind="unknown_op"), 1)
            self.assertEqual(sample(text, "kvtier_errors_total", kind="unauthorized"), 0)
            self.assertEqual(sample(text, "kvtier_tier_capacity_blocks", tier="device"), 16)
            self.assertEqual(sample(text, "kvtier_tier_capacity_blocks", tier="host"), 48)
            self.assertGreater(sample(text, "kvtier_tier_used_blocks", tier="device"), 0)
            self.assertGreater(sample(text, "kvtier_evictions_total", tier="device"), 0)
            # Each lookup asked the device for 3 blocks.
            self.assertEqual(sample(text, "kvtier_lookup_blocks_total", tier="device",
                                    source="lookup"), 9)
            self.assertEqual(sample(text, "kvtier_lookup_blocks_total", tier="device",
                                    source="admit"), 30)
            self.assertGreater(sample(text, "kvtier_link_bytes_total", link="d2h"), 0)
            self.assertEqual(sample(text, "kvtier_engines"), 1)
            self.assertGreaterEqual(sample(text, "kvtier_copies_in_flight"), 0)
            self.assertEqual(server.stop(), 0)


    def test_every_metric_passes_promtool(self):
        # tools/setup installs Debian's prometheus package for promtool: its absence is a
        # broken setup, not a reason to skip.
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool not found: run tools/setup (Debian's prometheus)")
        with Server(*SMALL, events=True, metrics=True) as server:
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                serve_prompt(c, 1, [1, 2, 3])
                text = scrape(server.metrics_port)
            self.assertEqual(server.stop(), 0)
        families = re.findall(r"^# TYPE (\S+) ", text, re.M)
        self.assertGreaterEqual(len(families), 18)
        for name in families:
            self.assertRegex(name, r"^kvtier_[a-z0-9_]+$")
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""))


class BadOptionsTest(unittest.TestCase):
    def run_serve(self, *args):
        p = subprocess.run([KVTIER, "serve", "--bind", "tcp://127.0.0.1:*", *args],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def test_bad_endpoints_are_bad_input(self):
        code, out = self.run_serve("--events", "tcp://0.0.0.0:*")
        self.assertEqual(code, 2, out)
        self.assertIn("--events tcp://0.0.0.0:*", out)
        self.assertIn("--token", out)
        code, out = self.run_serve("--events", "tcp://127.0.0.1:notaport")
        self.assertEqual(code, 2, out)
        self.assertIn("'tcp://127.0.0.1:notaport'", out)
        code, out = self.run_serve("--events-replay", "tcp://127.0.0.1:*")
        self.assertEqual(code, 2, out)
        self.assertIn("--events-replay needs --events", out)
        code, out = self.run_serve("--metrics-port", "0", "--metrics-host", "0.0.0.0")
        self.assertEqual(code, 2, out)
        self.assertIn("--metrics-host 0.0.0.0", out)
        code, out = self.run_serve("--metrics-port", "70000")
        self.assertEqual(code, 2, out)
        code, out = self.run_serve("--events", "tcp://127.0.0.1:*", "--set",
                                   "serve.events_buffer=0")
        self.assertEqual(code, 2, out)
        self.assertIn("serve.events_buffer", out)


if __name__ == "__main__":
    unittest.main()
