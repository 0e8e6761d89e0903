"""Replays a Mooncake trace against ``kvtier serve``, one request at a time, and reports hit ratios.

Each request, in arrival order (ties: file order), goes through the verbs an engine's scheduler
would use: ``allocate`` (its prefix past the tree's match is prefetched from storage; ``wait``
while that is pending), ``step`` admitting it for its prompt, ``step`` reporting the prompt
computed and growing it to the tokens its decode keeps (prompt + output − 1), then ``finish``.
Each request is sent at its arrival time on the server's clock (``hello``'s ``speed``), so that
what earlier requests started (write-through copies, storage writes) lands in the gaps as it
does in a replay. The hits of its admission are the replay's first-admission hits, so when the
trace's requests do not overlap in time the ratios equal ``kvtier replay --clock wall``'s with
the same config and ``--speed`` (the same cache decisions in the same order). Overlapping
requests would need the scheduler's batching, which this driver does not model.

Blocks are named by a chained hash of (parent, trace id, part), as kvtier names trace blocks,
so equal prefixes give equal blocks; the hash function differs from kvtier's (xxHash is not a
dependency here), which changes names but never which blocks are equal.

    python3 -m kvtier_client.driver --endpoint tcp://127.0.0.1:5557 --trace T.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .client import Client, KvtierError, ModelShape, Prompt, StepWork, read_curve_key

MOONCAKE_BLOCK_TOKENS = 512


@dataclass
class TraceRequest:
    line: int
    timestamp_ms: float
    input_tokens: int
    output_tokens: int
    hash_ids: List[int]


class TraceError(ValueError):
    """A trace line that cannot be read; the message names the file, line and field."""


def read_mooncake(path: str) -> List[TraceRequest]:
    out: List[TraceRequest] = []
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}:{n}: not JSON: {e}") from None
            for key in ("timestamp", "input_length", "output_length", "hash_ids"):
                if key not in rec:
                    raise TraceError(f"{path}:{n}: missing '{key}'")
            ids = rec["hash_ids"]
            if not isinstance(ids, list) or not all(isinstance(i, int) and i >= 0 for i in ids):
                raise TraceError(f"{path}:{n}: 'hash_ids' must be a list of non-negative integers")
            inp, outp = rec["input_length"], rec["output_length"]
            if not isinstance(inp, int) or inp < 1 or not isinstance(outp, int) or outp < 1:
                raise TraceError(f"{path}:{n}: 'input_length' and 'output_length' must be "
                                 f"positive integers")
            if len(ids) * MOONCAKE_BLOCK_TOKENS >= inp + MOONCAKE_BLOCK_TOKENS:
                raise TraceError(f"{path}:{n}: {len(ids)} hash_ids cover more than "
                                 f"input_length {inp}")
            out.append(TraceRequest(n, float(rec["timestamp"]), inp, outp, ids))
    out.sort(key=lambda r: (r.timestamp_ms, r.line))  # stable: ties keep file order
    return out


def _chain(parent: int, trace_id: int, part: int) -> int:
    data = b"".join(x.to_bytes(8, "little") for x in (parent, trace_id, part))
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def trace_blocks(ids: Sequence[int], input_tokens: int, block_size: int,
                 trace_block: int = MOONCAKE_BLOCK_TOKENS) -> List[Tuple[int, int]]:
    """(hash, tokens) of a request's cache blocks: each trace block split into cache blocks,
    or runs of trace blocks merged, as kvtier maps them (docs/design.md, "Blocks and their
    identity"). Only full blocks are named: a partial last block is never shared, so its tokens
    belong to no block (docs/design.md, "Hit ratio")."""
    if trace_block % block_size and block_size % trace_block:
        raise ValueError(f"cache block size {block_size} cannot map {trace_block}-token blocks")
    def tokens_of(i: int) -> int:
        return min(trace_block, input_tokens - i * trace_block)
    out: List[Tuple[int, int]] = []
    parent = 0
    if block_size <= trace_block:
        split = block_size < trace_block
        for i, tid in enumerate(ids):
            left = tokens_of(i)
            part = 1 if split else 0
            while left >= block_size:
                parent = _chain(parent, tid, part)
                out.append((parent, block_size))
                left -= block_size
                part += 1
            if left > 0:
                return out  # a partial block is no block
        return out
    group = block_size // trace_block
    for first in range(0, len(ids), group):
        h, n = parent, 0
        for i in range(first, min(first + group, len(ids))):
            h = _chain(h, ids[i], 0)
            n += tokens_of(i)
        if n < block_size:
            return out  # a partial block is no block
        parent = h
        out.append((parent, n))
    return out


@dataclass
class DriverResult:
    requests: int = 0
    finished: int = 0
    rejected: int = 0
    prompt_blocks: int = 0
    prompt_tokens: int = 0
    hit_blocks: Dict[str, int] = field(default_factory=lambda: {"device": 0, "host": 0, "storage": 0})
    hit_tokens: Dict[str, int] = field(default_factory=lambda: {"device": 0, "host": 0, "storage": 0})
    pending_allocations: int = 0
    wall_s: float = 0.0

    def ratios(self) -> Dict[str, object]:
        blocks = max(self.prompt_blocks, 1)
        tokens = max(self.prompt_tokens, 1)
        return {
            "blocks": sum(self.hit_blocks.values()) / blocks,
            "tokens": sum(self.hit_tokens.values()) / tokens,
            "by_tier": {t: {"blocks": self.hit_blocks[t] / blocks,
                            "tokens": self.hit_tokens[t] / tokens} for t in self.hit_blocks},
        }

    def to_json(self) -> Dict[str, object]:
        return {"requests": {"total": self.requests, "finished": self.finished,
                             "rejected": self.rejected, "finished_blocks": self.prompt_blocks,
                             "finished_input_tokens": self.prompt_tokens},
                "hit_ratio": self.ratios(),
                "hits": {"blocks": self.hit_blocks, "tokens": self.hit_tokens},
                "pending_allocations": self.pending_allocations, "wall_s": self.wall_s}


def settle_copies(client: Client, timeout_s: float = 60.0) -> None:
    """Waits until the server has no block copy in flight (``stats``: ``copies_in_flight``), as
    a gap between arrivals lets the write policy's copies land before the next request."""
    deadline = time.monotonic() + timeout_s
    while client.stats()["controller"].get("copies_in_flight", 0) > 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"copies still in flight after {timeout_s} s")
        time.sleep(0.001)


def run_trace(client: Client, requests: Iterable[TraceRequest], block_size: int,
              speed: Optional[float] = None, time_scale: float = 1.0,
              settle: bool = False) -> DriverResult:
    """Serves every request in turn through ``client`` (already said hello).

    ``speed`` (the server's virtual seconds per wall second, as ``hello`` returns it): each
    request starts no earlier than its arrival (trace time × ``time_scale``) on that clock, as in
    the replay, so the copies and storage writes of earlier requests land in the gaps as they
    would there; None sends each request as soon as the previous one finished. ``settle``: after
    each request, wait until no block copy is in flight (``stats``)."""
    result = DriverResult()
    start = time.monotonic()
    first_ms: Optional[float] = None
    for req, r in enumerate(requests, 1):
        if speed:
            if first_ms is None:
                first_ms = r.timestamp_ms
            due = start + (r.timestamp_ms - first_ms) / 1000.0 * time_scale / speed
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        result.requests += 1
        # Prompt tokens no named block covers count only in the token total, as in the replay.
        blocks = trace_blocks(r.hash_ids, r.input_tokens, block_size)
        alloc = client.allocate(req, Prompt(blocks=blocks))
        if not alloc.ready:
            result.pending_allocations += 1
            client.wait(req)
        reply = client.step(StepWork(admits=[(req, r.input_tokens)]))
        admission = reply.admits[0] if reply.admits else None
        if admission is None or not admission.admitted:
            result.rejected += 1  # alone on the server: it can never fit
            client.finish(req)
            continue
        client.step(StepWork(computed=[(req, r.input_tokens)],
                             grows=[(req, r.input_tokens + r.output_tokens - 1)]))
        client.finish(req)
        result.finished += 1
        result.prompt_blocks += len(blocks)
        result.prompt_tokens += r.input_tokens
        h = admission.hits
        for tier, b, t in (("device", h.device_blocks, h.device_tokens),
                           ("host", h.host_blocks, h.host_tokens),
                           ("storage", h.storage_blocks, h.storage_tokens)):
            result.hit_blocks[tier] += b
            result.hit_tokens[tier] += t
        if settle:
            settle_copies(client)
    result.wall_s = time.monotonic() - start
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="kvtier_client.driver", description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", default="tcp://127.0.0.1:5557")
    p.add_argument("--token")
    p.add_argument("--curve-server-key-file",
                   help="the server's CURVE public key (a server with --curve-key-file; needed "
                        "off loopback): the calls and token travel encrypted")
    p.add_argument("--curve-key-file",
                   help="this client's CURVE secret key, for a server that admits listed keys "
                        "only (default: a fresh key pair)")
    p.add_argument("--trace", required=True, help="a Mooncake JSONL trace")
    p.add_argument("--model", default="llama3-8b",
                   help="the model the server serves (model.name; kvtier's default config's)")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--kv-dtype", default="bf16")
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="stretch arrival times (kvtier's trace.time_scale)")
    p.add_argument("--no-pace", action="store_true",
                   help="send each request as soon as the previous one finished, not at its "
                        "arrival time on the server's clock")
    p.add_argument("--settle", action="store_true",
                   help="after each request, wait until the server has no copy in flight")
    p.add_argument("--out", help="write the result as JSON here")
    a = p.parse_args(argv)
    try:
        requests = read_mooncake(a.trace)
        keys = {"server_key": read_curve_key(a.curve_server_key_file)
                if a.curve_server_key_file else None,
                "client_secret_key": read_curve_key(a.curve_key_file) if a.curve_key_file else None}
    except (OSError, ValueError) as e:  # TraceError is a ValueError
        print(f"kvtier_client.driver: {e}", file=sys.stderr)
        return 2
    try:
        with Client(a.endpoint, token=a.token, **keys) as c:
            h = c.hello(ModelShape(a.model, a.layers, a.kv_heads, a.head_dim, a.kv_dtype),
                        a.block_size, name="python-driver")
            result = run_trace(c, requests, a.block_size, None if a.no_pace else h.speed,
                               a.time_scale, a.settle)
            c.bye()
    except KvtierError as e:
        print(f"kvtier_client.driver: the server refused: {e}", file=sys.stderr)
        return 2 if e.kind in ("model_mismatch", "version", "unauthorized") else 1
    except TimeoutError as e:
        print(f"kvtier_client.driver: {e}", file=sys.stderr)
        return 1
    text = json.dumps(result.to_json(), indent=2, sort_keys=True)
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        import os
        os.replace(tmp, a.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
