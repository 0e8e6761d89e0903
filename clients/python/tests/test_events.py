"""The event decoder (both layouts) and the subscriber's gap handling, against a publisher that
follows the wire rules of docs/events.md (a PUB and a ROUTER in this process)."""

import os
import sys
import threading
import unittest
from collections import deque

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import msgpack  # noqa: E402
import zmq  # noqa: E402

from kvtier_client.names import server_names, xxh3_64_32  # noqa: E402
from kvtier_client.events import (END_SEQ, AllBlocksCleared, BlockRemoved, BlockStored,  # noqa
                                  DecodeError, EventSubscriber, TierIndex, decode_batch,
                                  starts_run)


def array_layout(ts, events, rank=None):
    batch = [ts, events] + ([rank] if rank is not None else [])
    return msgpack.packb(batch)


def map_layout(ts, events, rank=0):
    return msgpack.packb({"ts": ts, "events": events, "data_parallel_rank": rank})


class DecodeTest(unittest.TestCase):
    def test_array_layout(self):
        b = decode_batch(array_layout(1.5, [
            ["BlockStored", [1, 2], None, [7, 8], 16, None, "GPU"],
            ["BlockRemoved", [1], "GPU"],
            ["AllBlocksCleared"],
        ], 3), seq=9)
        self.assertEqual(b.seq, 9)
        self.assertEqual(b.ts, 1.5)
        self.assertEqual(b.data_parallel_rank, 3)
        self.assertEqual(b.events[0], BlockStored([1, 2], None, [7, 8], 16, None, "GPU"))
        self.assertEqual(b.events[1], BlockRemoved([1], "GPU"))
        self.assertIsInstance(b.events[2], AllBlocksCleared)

    def test_array_layout_older_and_newer_field_counts(self):
        # vLLM before `medium` had five fields; later ones add lora_name, extra_keys, group_idx.
        b = decode_batch(array_layout(0, [
            ["BlockStored", [5], 4, [], 16, None],
            ["BlockStored", [6], 5, [], 16, None, "CPU", "adapter", [None], 0],
            ["BlockRemoved", [5]],
        ]))
        self.assertIsNone(b.events[0].medium)
        self.assertEqual(b.events[1].lora_name, "adapter")
        self.assertIsNone(b.events[2].medium)
        self.assertIsNone(b.data_parallel_rank)

    def test_map_layout(self):
        b = decode_batch(map_layout(2.0, [
            {"type": "BlockStored", "block_hashes": [2**64 - 1], "parent_block_hash": 2**63,
             "token_ids": [], "block_size": 64, "lora_id": None, "medium": "host",
             "lora_name": None, "group_idx": 1},
            {"type": "BlockRemoved", "block_hashes": [3], "medium": "device"},
            {"type": "AllBlocksCleared"},
        ]))
        self.assertEqual(b.events[0].block_hashes, [2**64 - 1])
        self.assertEqual(b.events[0].parent_block_hash, 2**63)
        self.assertEqual(b.events[0].medium, "host")
        self.assertEqual(b.events[1], BlockRemoved([3], "device"))
        self.assertEqual(b.data_parallel_rank, 0)

    def test_mixed_layout(self):
        # A batch as an array with events as maps (a layout vLLM has also sent).
        b = decode_batch(array_layout(0, [{"type": "BlockRemoved", "block_hashes": [1],
                                           "medium": "GPU"}]))
        self.assertEqual(b.events[0], BlockRemoved([1], "GPU"))

    def test_bad_payloads_raise(self):
        for payload in (b"\xc1", msgpack.packb(5), msgpack.packb({"ts": 1}),
                        array_layout(0, [["Nope", [1]]]), array_layout(0, [7]),
                        map_layout(0, [{"type": "BlockStored"}])):
            with self.assertRaises(DecodeError):
                decode_batch(payload)

    def test_tier_index_follows(self):
        idx = TierIndex()
        idx.apply(decode_batch(map_layout(0, [
            {"type": "BlockStored", "block_hashes": [1, 2, 3], "parent_block_hash": None,
             "token_ids": [], "block_size": 16, "lora_id": None, "medium": "device",
             "lora_name": None}])))
        self.assertEqual(idx.prefix_blocks([1, 2, 3, 4], "device"), 3)
        self.assertEqual(idx.parent[3], 2)
        idx.apply(decode_batch(map_layout(0, [{"type": "BlockRemoved", "block_hashes": [2],
                                                "medium": "device"}])))
        self.assertEqual(idx.prefix_blocks([1, 2, 3], "device"), 1)
        idx.apply(decode_batch(map_layout(0, [{"type": "AllBlocksCleared"}])))
        self.assertEqual(idx.held("device"), set())
        self.assertEqual(idx.cleared, 1)


class NamesTest(unittest.TestCase):
    def test_server_names_match_libxxhash(self):
        # Known answers of XXH3_64bits_withSeed over le64(parent, 0x7365727665, hash, tokens)
        # with seed 0x6b76746965722d69, chained, computed with libxxhash (serve/block_names.hpp).
        self.assertEqual(server_names([(1000, 64), (1001, 64), (2**64 - 1, 17)]),
                         [3307070682865875369, 18427255287180091938, 2552901063972119762])
        self.assertEqual(server_names([1000, 1001], 64), server_names([(1000, 64), (1001, 64)]))
        # A name fixes its prefix: the same hash after another parent is another block.
        self.assertNotEqual(server_names([7, 1001], 64)[1], server_names([1000, 1001], 64)[1])
        with self.assertRaises(ValueError):
            xxh3_64_32(b"short", 0)


class FakePublisher:
    """PUB + ROUTER with a ring, by the rules of docs/events.md; `drop` skips sending some."""

    def __init__(self, ring=100):
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.pub.bind("tcp://127.0.0.1:*")
        self.replay = self.ctx.socket(zmq.ROUTER)
        self.replay.bind("tcp://127.0.0.1:*")
        self.ring = deque(maxlen=ring)
        self.seq = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def endpoints(self):
        return (self.pub.getsockopt_string(zmq.LAST_ENDPOINT),
                self.replay.getsockopt_string(zmq.LAST_ENDPOINT))

    def publish(self, events, drop=False):
        payload = map_layout(float(self.seq), events)
        seq = self.seq
        self.seq += 1
        self.ring.append((seq, payload))
        if not drop:
            self.pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])
        return seq

    def _serve(self):
        while not self.stop:
            if self.replay.poll(20):
                ident, _, start = self.replay.recv_multipart()
                start = int.from_bytes(start, "big")
                for seq, payload in list(self.ring):
                    if seq >= start:
                        self.replay.send_multipart([ident, b"", seq.to_bytes(8, "big"), payload])
                self.replay.send_multipart([ident, b"", END_SEQ, b""])

    def close(self):
        self.stop = True
        self.thread.join()
        self.pub.close(0)
        self.replay.close(0)
        self.ctx.term()


def removed(h):
    return [{"type": "BlockRemoved", "block_hashes": [h], "medium": "device"}]


class SubscriberTest(unittest.TestCase):
    def connect(self, pub, **kw):
        endpoint, replay = pub.endpoints()
        sub = EventSubscriber(endpoint, replay, **kw)
        # A SUB misses what is sent before its subscription arrives: probe until one gets through.
        for _ in range(200):
            pub.publish(removed(0))
            got = sub.poll(20)
            if got:
                return sub, got
        self.fail("the subscription never reached the publisher")

    def test_gap_is_filled_by_replay_in_order(self):
        pub = FakePublisher()
        try:
            sub, _ = self.connect(pub)
            first = pub.publish(removed(1))
            pub.publish(removed(2), drop=True)
            pub.publish(removed(3), drop=True)
            pub.publish(removed(4))
            got = []
            while len(got) < 4:
                more = sub.poll(2000)
                self.assertTrue(more, "nothing arrived")
                got += more
            self.assertEqual([b.seq for b in got], list(range(first, first + 4)))
            self.assertEqual([b.events[0].block_hashes[0] for b in got], [1, 2, 3, 4])
            self.assertEqual(sub.replayed, 2)
            self.assertEqual(sub.lost, 0)
            sub.close()
        finally:
            pub.close()

    def test_what_the_ring_lost_is_counted(self):
        pub = FakePublisher(ring=2)
        try:
            sub, _ = self.connect(pub)
            for h in range(5):
                pub.publish(removed(10 + h), drop=True)
            last = pub.publish(removed(99))
            got = []
            while not got or got[-1].seq != last:
                more = sub.poll(2000)
                self.assertTrue(more)
                got += more
            # The ring (2) kept the last dropped one and the live one: 4 lost, 1 replayed.
            self.assertEqual(sub.lost, 4)
            self.assertEqual(sub.replayed, 1)
            self.assertEqual([b.events[0].block_hashes[0] for b in got][-2:], [14, 99])
            sub.close()
        finally:
            pub.close()

    def test_start_seq_replays_from_the_beginning(self):
        pub = FakePublisher()
        try:
            for h in range(3):
                pub.publish(removed(h), drop=True)
            endpoint, replay = pub.endpoints()
            sub = EventSubscriber(endpoint, replay, start_seq=0)
            got = []
            for _ in range(200):
                pub.publish(removed(100))
                got += sub.poll(20)
                if got:
                    break
            self.assertEqual([b.seq for b in got], list(range(len(got))))
            self.assertEqual([b.events[0].block_hashes[0] for b in got][:3], [0, 1, 2])
            self.assertEqual(sub.lost, 0)
            sub.close()
        finally:
            pub.close()

    def test_a_restart_is_a_new_run_not_a_loss(self):
        pub = FakePublisher()
        try:
            sub, _ = self.connect(pub)
            pub.publish(removed(1))
            # A restart: the numbers jump (kvtier serve starts them at its start time) and the
            # new run's first batch clears; the subscriber misses it live and asks the replay.
            pub.ring.clear()
            pub.seq += 10 ** 6
            first = pub.publish([{"type": "AllBlocksCleared"}], drop=True)
            last = pub.publish(removed(2))
            got = []
            while not got or got[-1].seq != last:
                more = sub.poll(2000)
                self.assertTrue(more)
                got += more
            self.assertEqual([b.seq for b in got][-2:], [first, last])
            self.assertTrue(starts_run(got[-2]))
            self.assertEqual((sub.restarts, sub.lost), (1, 0))
            sub.close()
        finally:
            pub.close()


if __name__ == "__main__":
    unittest.main()
