"""KV events: decode kvtier's (and vLLM's) event batches and follow them without losing any.

The publisher (``kvtier serve --events``) sends ``[topic, seq, payload]``: ``seq`` an 8-byte
big-endian number, one more per batch; ``payload`` a msgpack ``EventBatch``, the array
``[ts, events, rank]``. kvtier writes current vLLM's events by default (maps tagged by
``type``: ``{"type": "BlockStored", ...}``) and vLLM v0.11.0's on request (positional arrays:
``["BlockStored", ...fields]``; docs/events.md). ``decode_batch`` reads both, in any mix, and a
batch written as a map.

A kvtier serve run numbers its batches from its start time in nanoseconds since the Unix epoch
and its first batch is one ``AllBlocksCleared``: after a restart the numbers jump, the gap is
asked of the replay socket, and the batch that starts the new run tells the subscriber to start
over; that gap is counted in ``restarts``, not in ``lost``.

A subscriber that sees a number jump asks the replay socket for the batches in between
(``[b"", start as 8 bytes]``; answered ``[b"", seq, payload]`` per kept batch, then
``[b"", -1 as 8 bytes, b""]``). What the publisher's ring no longer holds is counted in ``lost``:
whoever follows the index must then start over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Union

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)

# Field order of the positional layout (vLLM's msgspec structs, array_like=True). Later fields
# have defaults, so older publishers may stop early and newer ones may add more.
_FIELDS = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                    "medium", "lora_name", "extra_keys", "group_idx"),
    "BlockRemoved": ("block_hashes", "medium", "group_idx"),
    "AllBlocksCleared": (),
}


class DecodeError(ValueError):
    """A payload that is not an EventBatch of either layout."""


@dataclass
class BlockStored:
    block_hashes: List[Union[int, bytes]]
    parent_block_hash: Optional[Union[int, bytes]] = None
    token_ids: List[int] = field(default_factory=list)
    block_size: int = 0
    lora_id: Optional[int] = None
    medium: Optional[str] = None
    lora_name: Optional[str] = None


@dataclass
class BlockRemoved:
    block_hashes: List[Union[int, bytes]]
    medium: Optional[str] = None


@dataclass
class AllBlocksCleared:
    pass


Event = Union[BlockStored, BlockRemoved, AllBlocksCleared]


@dataclass
class EventBatch:
    seq: int
    ts: float
    events: List[Event]
    data_parallel_rank: Optional[int] = None


def _event(raw: Any) -> Event:
    if isinstance(raw, dict):
        tag = raw.get("type")
        if tag not in _FIELDS:
            raise DecodeError(f"unknown event type {tag!r}")
        values = {k: raw[k] for k in _FIELDS[tag] if k in raw}
    elif isinstance(raw, (list, tuple)) and raw and isinstance(raw[0], str):
        tag = raw[0]
        if tag not in _FIELDS:
            raise DecodeError(f"unknown event type {tag!r}")
        values = dict(zip(_FIELDS[tag], raw[1:]))
    else:
        raise DecodeError(f"an event must be a tagged array or a map, got {type(raw).__name__}")
    if tag == "AllBlocksCleared":
        return AllBlocksCleared()
    if "block_hashes" not in values or not isinstance(values["block_hashes"], list):
        raise DecodeError(f"{tag} without a block_hashes list")
    if tag == "BlockRemoved":
        return BlockRemoved(values["block_hashes"], values.get("medium"))
    known = {k: v for k, v in values.items() if k in BlockStored.__dataclass_fields__}
    return BlockStored(**known)


def decode_batch(payload: bytes, seq: int = -1) -> EventBatch:
    """One EventBatch from its msgpack bytes, either layout."""
    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several types
        raise DecodeError(f"not msgpack: {e}") from e
    if isinstance(raw, dict):
        if "ts" not in raw or "events" not in raw:
            raise DecodeError("an EventBatch map needs 'ts' and 'events'")
        ts, events, rank = raw["ts"], raw["events"], raw.get("data_parallel_rank")
    elif isinstance(raw, (list, tuple)) and len(raw) >= 2:
        ts, events = raw[0], raw[1]
        rank = raw[2] if len(raw) > 2 else None
    else:
        raise DecodeError("an EventBatch is a map or an array of at least [ts, events]")
    if not isinstance(events, list) or not isinstance(ts, (int, float)):
        raise DecodeError("EventBatch 'ts' must be a number and 'events' a list")
    return EventBatch(seq, float(ts), [_event(e) for e in events], rank)


def starts_run(batch: EventBatch) -> bool:
    """Whether ``batch`` is the first of a publisher's run (it begins with AllBlocksCleared)."""
    return bool(batch.events) and isinstance(batch.events[0], AllBlocksCleared)


class EventSubscriber:
    """Follows a publisher: yields every batch once, in sequence order, filling gaps by replay.

    ``start_seq``: the first number wanted (0: everything the ring still holds); None takes the
    stream from the first batch that arrives.
    """

    def __init__(self, endpoint: str, replay_endpoint: Optional[str] = None, topic: str = "",
                 start_seq: Optional[int] = None, context: Optional[zmq.Context] = None,
                 replay_timeout_ms: int = 5000):
        self._ctx = context or zmq.Context.instance()
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self._sub.connect(endpoint)
        self._replay_endpoint = replay_endpoint
        self._replay_timeout_ms = replay_timeout_ms
        self._dealer: Optional[zmq.Socket] = None
        self.next_seq: Optional[int] = start_seq
        self.lost = 0          # batches neither received nor replayable
        self.replayed = 0      # batches that came through replay
        self.received = 0      # batches that came live
        self.restarts = 0      # publisher runs that started after one this subscriber followed

    def close(self) -> None:
        self._sub.close(0)
        if self._dealer is not None:
            self._dealer.close(0)

    def __enter__(self) -> "EventSubscriber":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def poll(self, timeout_ms: int = 1000) -> List[EventBatch]:
        """The batches available within ``timeout_ms`` (waits for the first only), in order."""
        out: List[EventBatch] = []
        if not self._sub.poll(timeout_ms):
            return out
        while True:
            frames = self._sub.recv_multipart()
            self._take(frames, out)
            if not self._sub.poll(0):
                return out

    def replay_from(self, start: int) -> List[EventBatch]:
        """Asks the replay socket for every kept batch from ``start`` on."""
        if self._replay_endpoint is None:
            return []
        if self._dealer is None:
            self._dealer = self._ctx.socket(zmq.DEALER)
            self._dealer.setsockopt(zmq.LINGER, 0)
            self._dealer.connect(self._replay_endpoint)
        self._dealer.send_multipart([b"", start.to_bytes(8, "big")])
        got: List[EventBatch] = []
        while True:
            if not self._dealer.poll(self._replay_timeout_ms):
                # A replay that never ends: drop the socket so a late answer cannot mix in.
                self._dealer.close(0)
                self._dealer = None
                raise TimeoutError(f"no replay answer from {self._replay_endpoint}")
            frames = self._dealer.recv_multipart()
            # [empty, seq, payload]; a publisher that also sends the topic adds a frame before seq.
            if len(frames) not in (3, 4) or frames[0] != b"":
                raise DecodeError(f"replay answer of {len(frames)} frames")
            seq_bytes, payload = frames[-2], frames[-1]
            if seq_bytes == END_SEQ:
                return got
            got.append(decode_batch(payload, int.from_bytes(seq_bytes, "big")))

    def _take(self, frames: Sequence[bytes], out: List[EventBatch]) -> None:
        if len(frames) != 3 or len(frames[1]) != 8:
            raise DecodeError(f"an event message has 3 frames with an 8-byte number, "
                              f"got {len(frames)}")
        seq = int.from_bytes(frames[1], "big")
        batch = decode_batch(frames[2], seq)
        if self.next_seq is not None and seq < self.next_seq:
            if not starts_run(batch):
                return  # already had it (through replay)
            self.restarts += 1  # a publisher whose clock went back: its run starts here
        elif self.next_seq is not None and seq > self.next_seq:
            self._fill(self.next_seq, seq, out, starts_run(batch))
        out.append(batch)
        self.received += 1
        self.next_seq = seq + 1

    def _fill(self, start: int, end: int, out: List[EventBatch], run_at_end: bool) -> None:
        expected = start
        try:
            replayed = self.replay_from(start)
        except TimeoutError:
            replayed = []
        for b in replayed:
            if b.seq < expected or b.seq >= end:
                continue
            if starts_run(b):  # a restart: the numbers skipped were never batches
                self.restarts += 1
                expected = b.seq
            self.lost += b.seq - expected
            out.append(b)
            self.replayed += 1
            expected = b.seq + 1
        if run_at_end:
            self.restarts += 1
        else:
            self.lost += end - expected


class TierIndex:
    """The blocks each medium holds, as the events tell it: what a cache-aware router keeps."""

    def __init__(self) -> None:
        self.blocks: Dict[str, Set[Union[int, bytes]]] = {}
        self.parent: Dict[Union[int, bytes], Optional[Union[int, bytes]]] = {}
        self.cleared = 0

    def apply(self, batch: EventBatch) -> None:
        for e in batch.events:
            if isinstance(e, BlockStored):
                held = self.blocks.setdefault(e.medium or "", set())
                parent = e.parent_block_hash
                for h in e.block_hashes:
                    held.add(h)
                    self.parent[h] = parent
                    parent = h
            elif isinstance(e, BlockRemoved):
                self.blocks.setdefault(e.medium or "", set()).difference_update(e.block_hashes)
            else:
                self.blocks.clear()
                self.cleared += 1

    def held(self, medium: str) -> Set[Union[int, bytes]]:
        return self.blocks.get(medium, set())

    def prefix_blocks(self, hashes: Sequence[Union[int, bytes]], medium: str) -> int:
        """How many leading blocks of ``hashes`` the medium holds."""
        held = self.held(medium)
        n = 0
        for h in hashes:
            if h not in held:
                break
            n += 1
        return n


def wait_for(predicate, timeout_s: float = 5.0, interval_s: float = 0.01) -> bool:
    """Polls ``predicate`` until it holds or ``timeout_s`` passes (tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()
