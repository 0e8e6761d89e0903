"""kvtier serve's KV events as each consumer reads them (docs/events.md): current vLLM, vLLM
v0.11.0, llm-d and Dynamo, through the strict decoders of router_decoders.py, in both of
serve.events_layout's layouts; the topic llm-d parses; a publisher that connects to a subscriber
that binds. The decoders are shown to refuse what their consumers refuse, so that passing them
means something. About 3 s."""

import socket
import time
import unittest

import msgpack
import zmq

from serve_fixture import Server

from kvtier_client import Client, ModelShape, Prompt, StepWork
from router_decoders import (dynamo_decode, free_endpoint, llm_d_decode, replay_payloads,
                             vllm_current_decode, vllm_v0110_decode)

MODEL = ModelShape("llama3-8b", 32, 8, 128, "bf16")
BS = 64
# 8 device blocks: a second prompt pushes the first to host, so events of both tiers and
# removals come.
SMALL = ["--set", "cache.device_tokens=512", "--set", "cache.host_tokens=3072",
         "--set", "cache.write_policy=write_through"]
TOPIC = f"kv@{socket.gethostname()}@{MODEL.name}"
DECODERS = {"vllm-current": lambda t, p: vllm_current_decode(p),
            "vllm-0.11.0": lambda t, p: vllm_v0110_decode(p),
            "llm-d": llm_d_decode,
            "dynamo": lambda t, p: dynamo_decode(p, BS)}
# Which consumers read which layout: current vLLM only maps, v0.11.0 only arrays; llm-d (with
# its PR #661) and Dynamo both.
READERS = {"map": ("vllm-current", "llm-d", "dynamo"),
           "array": ("vllm-0.11.0", "llm-d", "dynamo")}


def prompts(first=0):
    return [list(range(10000 * p, 10000 * p + 5 * BS + 7)) for p in range(first + 1, first + 4)]


def drive(endpoint, first=0):
    """Three prompts of five full blocks through an 8-block device: stores on both tiers and
    removals from the device."""
    with Client(endpoint, timeout_ms=10000) as c:
        c.hello(MODEL, BS)
        for req, tokens in enumerate(prompts(first), 1):
            if not c.allocate(req, Prompt(tokens=tokens)).ready:
                c.wait(req)
            c.step(StepWork(admits=[(req, len(tokens))]))
            c.step(StepWork(computed=[(req, len(tokens))]))
            c.finish(req)
            quiet(c)


def quiet(c):
    """Until kvtier's copies landed: the next prompt evicts only blocks backed up."""
    for _ in range(2000):
        if c.stats()["controller"]["copies_in_flight"] == 0:
            return
        time.sleep(0.005)
    raise AssertionError("kvtier's copies never landed")


def collect(sub, until, timeout_s=20):
    """Live messages [topic, seq, payload] until ``until(messages)``."""
    messages = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not until(messages):
        if sub.poll(50):
            messages.append(sub.recv_multipart())
    return messages


def has_stores_and_removals(payloads):
    """Every block backed up to the host, and a removal from the device."""
    events = [e for p in payloads for e in dynamo_decode(p, BS)]
    host = sum(len(e["blocks"]) for e in events
               if e["kind"] == "stored" and e["tier"] == "HostPinned")
    removed = [e["tier"] for e in events if e["kind"] == "removed"]
    return host >= 5 * len(prompts()) and "Device" in removed


class ConsumersTest(unittest.TestCase):
    def run_layout(self, layout):
        """The run's messages: [topic, seq, payload] as sent live (the topic and numbers) and
        every payload, from the replay socket (a subscriber misses what comes before its
        subscription)."""
        ctx = zmq.Context.instance()
        with Server(*SMALL, "--set", f"serve.events_layout={layout}", events=True) as server:
            sub = ctx.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(server.events)
            self.addCleanup(sub.close, 0)
            drive(server.endpoint)
            self.driven = [0]
            live = collect(sub, lambda m: len(m) > 0, 2)
            for attempt in range(1, 20):  # the subscription came after the events: more
                if live:
                    break
                drive(server.endpoint, first=10 * attempt)
                self.driven.append(10 * attempt)
                live = collect(sub, lambda m: len(m) > 0, 1)
            payloads = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not has_stores_and_removals(payloads):
                payloads = replay_payloads(server.replay)
            self.assertEqual(server.stop(), 0)
        self.assertTrue(live)
        self.assertTrue(has_stores_and_removals(payloads), f"{len(payloads)} batches")
        # The live messages' frames, then every payload of the run under their topic.
        for topic, seq, payload in live:
            self.assertIn(payload, payloads)
        return [(live[0][0], live[0][1], p) for p in payloads]

    def check_layout(self, layout):
        messages = self.run_layout(layout)
        for topic, seq, payload in messages:
            self.assertEqual(topic.decode(), TOPIC)
            self.assertEqual(len(seq), 8)
            for name, decode in DECODERS.items():
                if name in READERS[layout]:
                    decode(topic, payload)
                else:
                    with self.assertRaises(AssertionError, msg=f"{name} read {layout}"):
                        decode(topic, payload)
        # What each router keeps: the prompts' full blocks with their own tokens (llm-d keys
        # on token_ids, Dynamo slices them by block size): every block on the host (the
        # write-through backups; nothing leaves the host here), on the device those that turned
        # ready there before they were evicted (a copy is announced once ready).
        full = sorted(t[i * BS:(i + 1) * BS] for first in self.driven for t in prompts(first)
                      for i in range(5))
        dynamo = [e for m in messages for e in dynamo_decode(m[2], BS) if e["kind"] == "stored"]
        host = [tokens for e in dynamo if e["tier"] == "HostPinned" for _, tokens in e["blocks"]]
        self.assertEqual(sorted(host), full)
        device = [tokens for e in dynamo if e["tier"] == "Device" for _, tokens in e["blocks"]]
        self.assertTrue(device and all(b in full for b in device))
        llm_d = [e for m in messages for e in llm_d_decode(m[0], m[2])[2] if e[0] == "stored"]
        cpu = [e[3][i * BS:(i + 1) * BS] for e in llm_d if e[4] == "cpu"
               for i in range(len(e[1]))]
        self.assertEqual(sorted(cpu), full)
        self.assertTrue(any(e[0] == "removed" and e[2] == "gpu"
                            for m in messages for e in llm_d_decode(m[0], m[2])[2]))

    def test_the_map_layout_current_vllm_llm_d_and_dynamo_read(self):
        self.check_layout("map")

    def test_the_array_layout_vllm_0110_llm_d_and_dynamo_read(self):
        self.check_layout("array")

    def test_the_default_is_the_map_layout_and_llm_ds_topic(self):
        ctx = zmq.Context.instance()
        with Server(*SMALL, events=True) as server:
            sub = ctx.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
            sub.connect(server.events)
            self.addCleanup(sub.close, 0)
            time.sleep(0.2)
            drive(server.endpoint)
            messages = collect(sub, lambda m: any(b"BlockStored" in x[2] for x in m))
            self.assertEqual(server.stop(), 0)
        stored = [m for m in messages if b"BlockStored" in m[2]]
        self.assertTrue(stored)
        pod, model, _ = llm_d_decode(stored[0][0], stored[0][2])
        self.assertEqual((pod, model), (socket.gethostname(), MODEL.name))
        vllm_current_decode(stored[0][2])

    def test_the_publisher_connects_to_a_subscriber_that_binds(self):
        # llm-d's subscriber binds (tcp://*:5557) and engines connect their PUB sockets to it.
        ctx = zmq.Context.instance()
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
        endpoint = free_endpoint()
        sub.bind(endpoint)
        self.addCleanup(sub.close, 0)
        with Server(*SMALL, "--events", endpoint, "--set", "serve.events_socket=connect",
                    "--set", "serve.events_topic=kv@pod-7@{model}") as server:
            # A PUB socket drops what it sends before the connection and the subscription are
            # made: prompts go on until some arrive.
            messages = []
            for attempt in range(20):
                drive(server.endpoint, first=10 * attempt)
                messages = collect(sub, lambda m: any(b"BlockStored" in x[2] for x in m), 0.5)
                if messages:
                    break
            self.assertEqual(server.stop(), 0)
        self.assertTrue(any(f"events to {endpoint} (connecting)" in line
                            for line in server.lines), server.lines)
        stored = [m for m in messages if b"BlockStored" in m[2]]
        self.assertTrue(stored, f"{len(messages)} messages")
        self.assertEqual(llm_d_decode(stored[0][0], stored[0][2])[:2], ("pod-7", MODEL.name))

    def test_a_bad_topic_placeholder_is_refused_naming_the_key(self):
        with self.assertRaises(RuntimeError) as e:
            Server(*SMALL, "--set", "serve.events_topic=kv@{host}", events=True, timeout_s=20)
        self.assertIn("serve.events_topic", str(e.exception))
        self.assertIn("{host}", str(e.exception))


def batch(events, rank=0, ts=1.5):
    return msgpack.packb([ts, events] + ([rank] if rank is not None else []), use_bin_type=True)


STORED_ARRAY = ["BlockStored", [7, 8], None, list(range(2 * BS)), BS, None, "GPU", None]
STORED_MAP = {"type": "BlockStored", "block_hashes": [7, 8], "parent_block_hash": None,
              "token_ids": list(range(2 * BS)), "block_size": BS, "lora_id": None,
              "medium": "GPU", "lora_name": None}


class DecodersRefuseTest(unittest.TestCase):
    """Each decoder fails where its consumer fails: a decoder that passed everything would
    prove nothing about kvtier's events."""

    def outcome(self, topic, payload):
        ok = {}
        for name, decode in DECODERS.items():
            try:
                decode(topic, payload)
                ok[name] = True
            except AssertionError:
                ok[name] = False
        return ok

    def test_well_formed_events_pass_their_readers(self):
        self.assertEqual(self.outcome(TOPIC, batch([STORED_MAP])),
                         {"vllm-current": True, "vllm-0.11.0": False, "llm-d": True,
                          "dynamo": True})
        self.assertEqual(self.outcome(TOPIC, batch([STORED_ARRAY])),
                         {"vllm-current": False, "vllm-0.11.0": True, "llm-d": True,
                          "dynamo": True})

    def test_the_batch_as_a_map_fails_everyone(self):
        # What serve.events_layout=map wrote before: the batch itself a map.
        payload = msgpack.packb({"ts": 1.5, "events": [STORED_MAP], "data_parallel_rank": 0})
        self.assertEqual(set(self.outcome(TOPIC, payload).values()), {False})

    def test_each_decoders_own_refusals(self):
        # v0.11.0's field count (no lora_name): msgspec reads it, llm-d's struct count does not.
        short = batch([STORED_ARRAY[:7]])
        self.assertEqual(self.outcome(TOPIC, short)["vllm-0.11.0"], True)
        self.assertEqual(self.outcome(TOPIC, short)["llm-d"], False)
        # A map without a required field: current vLLM refuses, the routers read on.
        missing = dict(STORED_MAP)
        del missing["lora_name"]
        self.assertEqual(self.outcome(TOPIC, batch([missing])),
                         {"vllm-current": False, "vllm-0.11.0": False, "llm-d": True,
                          "dynamo": True})
        # A batch without data_parallel_rank: vLLM reads it, llm-d's and Dynamo's counts do not.
        self.assertEqual(self.outcome(TOPIC, batch([STORED_MAP], rank=None)),
                         {"vllm-current": True, "vllm-0.11.0": False, "llm-d": False,
                          "dynamo": False})
        # Too few tokens for the blocks: Dynamo leaves the blocks unpublished.
        short_tokens = dict(STORED_MAP, token_ids=list(range(BS)))
        self.assertFalse(self.outcome(TOPIC, batch([short_tokens]))["dynamo"])
        # An unknown tag fails the batch everywhere.
        self.assertEqual(set(self.outcome(TOPIC, batch([{"type": "BlockMoved"}])).values()),
                         {False})
        # An empty topic (vLLM's default) or another shape: llm-d indexes nothing.
        self.assertFalse(self.outcome("", batch([STORED_MAP]))["llm-d"])
        self.assertFalse(self.outcome("kv-events", batch([STORED_MAP]))["llm-d"])
        # A token id beyond 32 bits: the routers' []uint32 / Vec<u32> refuse it.
        wide = dict(STORED_MAP, token_ids=[2 ** 40] * (2 * BS))
        self.assertEqual(self.outcome(TOPIC, batch([wide])),
                         {"vllm-current": True, "vllm-0.11.0": False, "llm-d": False,
                          "dynamo": False})


if __name__ == "__main__":
    unittest.main()
