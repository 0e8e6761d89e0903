"""KV events and metrics of a running kvtier serve: a follower of the events knows what the
server holds per tier, and /metrics counts what was asked."""

import re
import subprocess
import unittest
import urllib.request

from serve_fixture import KVTIER, Server

from kvtier_client import Client, EventSubscriber, ModelShape, Prompt, StepWork, TierIndex
from kvtier_client.events import wait_for
from kvtier_client.names import server_names

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
            prompts = [[1000 * p + i for i in range(6)] for p in range(6)]
            with Client(server.endpoint, timeout_ms=10000) as c:
                c.hello(MODEL, BS)
                for req, hashes in enumerate(prompts + prompts[:2], 1):
                    serve_prompt(c, req, hashes)

                def agrees():
                    for b in sub.poll(50):
                        index.apply(b)
                    for hashes in prompts:
                        hits = c.lookup(Prompt(hashes=hashes))
                        names = server_names(hashes, BS)  # what the events carry
                        if index.prefix_blocks(names, "device") != hits.device_blocks:
                            return False
                        rest = names[hits.device_blocks:]
                        if index.prefix_blocks(rest, "host") != hits.host_blocks:
                            return False
                    return True

                self.assertTrue(wait_for(agrees, 20), f"index {index.blocks}")
                # The small device evicted: some prompt lives on the host only.
                self.assertTrue(index.held("host") - index.held("device"))
                self.assertEqual(sub.lost, 0)
                # Every batch came live or through replay (the first ones, sent before the
                # subscription reached the publisher), in order, none twice.
                self.assertEqual(sub.next_seq, sub.received + sub.replayed)
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
            self.assertEqual(sample(text, "kvtier:calls_total", verb="lookup"), 3)
            self.assertEqual(sample(text, "kvtier:calls_total", verb="allocate"), 5)
            self.assertEqual(sample(text, "kvtier:call_duration_seconds_count", verb="lookup"), 3)
            self.assertEqual(sample(text, "kvtier:call_duration_seconds_bucket", verb="lookup",
                                    le="+Inf"), 3)
            self.assertEqual(sample(text, "kvtier:errors_total", kind="unknown_op"), 1)
            self.assertEqual(sample(text, "kvtier:errors_total", kind="unauthorized"), 0)
            self.assertEqual(sample(text, "kvtier:tier_capacity_blocks", tier="device"), 16)
            self.assertEqual(sample(text, "kvtier:tier_capacity_blocks", tier="host"), 48)
            self.assertGreater(sample(text, "kvtier:tier_used_blocks", tier="device"), 0)
            self.assertGreater(sample(text, "kvtier:evictions_total", tier="device"), 0)
            # Each lookup asked the device for 3 blocks.
            self.assertEqual(sample(text, "kvtier:lookup_blocks_total", tier="device",
                                    source="lookup"), 9)
            self.assertEqual(sample(text, "kvtier:lookup_blocks_total", tier="device",
                                    source="admit"), 30)
            self.assertGreater(sample(text, "kvtier:link_bytes_total", link="d2h"), 0)
            self.assertEqual(sample(text, "kvtier:engines"), 1)
            self.assertGreaterEqual(sample(text, "kvtier:copies_in_flight"), 0)
            self.assertEqual(server.stop(), 0)


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
