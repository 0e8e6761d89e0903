"""Decoders of KV event batches written after the steps of two routers' own decoders, field by
field, so that the tests hold kvtier's events to what those routers accept:

- llm-d's KV cache manager (Go, vmihailenco/msgpack; ``pkg/kvcache/kvevents``): the batch is
  decoded as an array (``DecodeArrayLen``: a map fails and the whole batch is dropped) of at
  least 2 elements ``[ts float64, events, dp_rank int?]``; each event is unmarshalled as an
  array whose first element is the tag string and the rest the struct's fields in order
  (BlockStored: block_hashes, parent_block_hash, token_ids []uint32, block_size int, lora_id,
  medium; BlockRemoved: block_hashes, medium).
- Dynamo's KV router (Rust, rmp-serde): the batch is the tuple ``(f64, Vec<RawKvEvent>,
  Option<i32>)``; an array event is read in order: tag, block_hashes (u64 or i64),
  parent_block_hash, token_ids (Vec<u32>), block_size (usize), lora_id, medium, lora_name ...;
  ``medium`` maps GPU/DEVICE to its Device tier, CPU/CPU_PINNED/CPU_TIER1 to HostPinned,
  EXTERNAL/SHARED ... to External; a stored block keeps ``token_ids[offset:offset +
  block_size]`` (a Rust slice: too few tokens panic) and the blocks stop at the first whose
  size is not the router's block size.

Each raises AssertionError where the router would fail.
"""

import socket

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)
U64 = (0, 2 ** 64 - 1)
I64 = (-2 ** 63, 2 ** 63 - 1)


def free_endpoint():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"tcp://127.0.0.1:{port}"


def replay_payloads(replay_endpoint, start=0, timeout_ms=5000):
    """Every payload the replay socket still keeps from ``start`` on, as sent."""
    ctx = zmq.Context.instance()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(replay_endpoint)
    try:
        dealer.send_multipart([b"", start.to_bytes(8, "big")])
        out = []
        while True:
            assert dealer.poll(timeout_ms), "no replay answer"
            frames = dealer.recv_multipart()
            # vLLM's replay answer: [empty, seq, payload], no topic frame.
            assert len(frames) == 3 and frames[0] == b"", frames
            if frames[1] == END_SEQ:
                return out
            out.append(frames[2])
    finally:
        dealer.close(0)


def _int_in(v, bounds, what):
    assert isinstance(v, int) and not isinstance(v, bool), f"{what}: not an integer: {v!r}"
    assert bounds[0] <= v <= bounds[1], f"{what}: out of range: {v}"


def _hash(v, what):
    assert isinstance(v, int) and (U64[0] <= v <= U64[1] or I64[0] <= v <= I64[1]), \
        f"{what}: not a 64-bit integer: {v!r}"
    return v % 2 ** 64


def _opt(v, check):
    if v is not None:
        check(v)


def llm_d_decode(payload):
    """The events of one batch as llm-d's pool keeps them: [tag, fields...] lists."""
    batch = msgpack.unpackb(payload, raw=False)
    assert isinstance(batch, list), f"DecodeArrayLen: the batch is a {type(batch).__name__}"
    assert len(batch) >= 2, f"EventBatch: expected at least 2 fields, got {len(batch)}"
    assert isinstance(batch[0], float), "DecodeFloat64: ts"
    assert isinstance(batch[1], list), "Events: not an array"
    if len(batch) > 2:
        _int_in(batch[2], I64, "data_parallel_rank")
    out = []
    for raw in batch[1]:
        assert isinstance(raw, list) and raw, "tagged union: not an array with a tag"
        tag, fields = raw[0], raw[1:]
        assert isinstance(tag, str), "tag: not a string"
        if tag == "BlockStored":
            assert len(fields) >= 4, fields
            hashes, parent, tokens, size = fields[:4]
            assert isinstance(hashes, list)
            for h in hashes:
                _hash(h, "BlockHashes")
            _opt(parent, lambda p: _int_in(p, U64, "ParentBlockHash"))
            assert isinstance(tokens, list)
            for t in tokens:
                _int_in(t, (0, 2 ** 32 - 1), "TokenIds")
            _int_in(size, I64, "BlockSize")
            if len(fields) > 4:
                _opt(fields[4], lambda x: _int_in(x, I64, "LoraID"))
            if len(fields) > 5:
                _opt(fields[5], lambda m: isinstance(m, str) or _fail("Medium"))
        elif tag == "BlockRemoved":
            assert len(fields) >= 1 and isinstance(fields[0], list)
            for h in fields[0]:
                _hash(h, "BlockHashes")
            if len(fields) > 1:
                _opt(fields[1], lambda m: isinstance(m, str) or _fail("Medium"))
        elif tag != "AllBlocksCleared":
            continue  # "Unknown event tag": skipped
        out.append(raw)
    return out


def _fail(what):
    raise AssertionError(f"{what}: wrong type")


_TIERS = {"GPU": "Device", "DEVICE": "Device", "CPU": "HostPinned", "CPU_PINNED": "HostPinned",
          "CPU_TIER1": "HostPinned", "CPU_TIER2": "Disk", "DISK": "Disk", "NVME": "Disk",
          "EXTERNAL": "External", "NETWORK": "External", "REMOTE": "External",
          "SHARED": "External"}


def dynamo_decode(payload, kv_block_size):
    """The events of one batch as Dynamo's router converts them."""
    batch = msgpack.unpackb(payload, raw=False)
    assert isinstance(batch, list) and len(batch) == 3, "(f64, Vec<RawKvEvent>, Option<i32>)"
    ts, events, rank = batch
    assert isinstance(ts, float) and isinstance(events, list)
    _opt(rank, lambda r: _int_in(r, (-2 ** 31, 2 ** 31 - 1), "data_parallel_rank"))
    out = []
    for raw in events:
        assert isinstance(raw, list) and raw and isinstance(raw[0], str), "tagged sequence"
        tag, fields = raw[0], raw[1:] + [None] * 8
        if tag == "AllBlocksCleared":
            out.append({"kind": "cleared"})
            continue
        hashes = fields[0]
        assert isinstance(hashes, list), "missing block_hashes"
        hashes = [_hash(h, "block_hashes") for h in hashes]
        if tag == "BlockRemoved":
            medium = fields[1]
            out.append({"kind": "removed", "hashes": hashes,
                        "tier": _TIERS.get(medium, "Device")})
            continue
        assert tag == "BlockStored", f"unknown variant {tag}"
        parent, tokens, size, _lora_id, medium = fields[1:6]
        _opt(parent, lambda p: _hash(p, "parent_block_hash"))
        assert isinstance(tokens, list), "missing token_ids"
        for t in tokens:
            _int_in(t, (0, 2 ** 32 - 1), "token_ids")
        _int_in(size, (0, 2 ** 64 - 1), "block_size")
        assert len(set(hashes + ([parent] if parent is not None else []))) == \
            len(hashes) + (parent is not None), "self-referencing block"
        blocks, offset = [], 0
        for h in hashes:
            if size != kv_block_size:
                break  # "Block not published"
            assert offset + size <= len(tokens), "token_ids slice out of range (a panic)"
            blocks.append((h, tokens[offset:offset + size]))
            offset += size
        out.append({"kind": "stored", "parent": parent, "blocks": blocks,
                    "tier": _TIERS.get(medium, "Device")})
    return out
