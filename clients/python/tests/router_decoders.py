"""Strict decoders of KV event messages, one per consumer, each written after the steps of that
consumer's own decoder (facts read from its source; no code copied), so that the tests hold
kvtier's events to what each one accepts. Each raises AssertionError where its consumer would
fail or drop the message, and returns what the consumer keeps.

- ``vllm_v0110_decode``: vLLM v0.11.0's ``vllm/distributed/kv_events.py``: msgspec structs, all
  ``array_like=True, omit_defaults=True``, events ``tag=True``. msgspec decodes an array_like
  struct only from an array, fills fields in declaration order, gives absent trailing fields
  their default (an error where there is none) and ignores extra trailing elements; a tagged
  union member is an array led by its class name. EventBatch ``(ts: float, events,
  data_parallel_rank: int | None = None)``; BlockStored ``(block_hashes: list[int | bytes],
  parent_block_hash: int | bytes | None, token_ids: list[int], block_size: int, lora_id:
  int | None, medium: str | None)``; BlockRemoved ``(block_hashes, medium: str | None)``.
- ``vllm_current_decode``: current vLLM (after PR #42892, read at commit 0181ea3): the event
  structs lost ``array_like``, so msgspec decodes each event only from a map whose ``"type"`` key
  is its class name; every field without a default must be present, unknown keys are ignored.
  BlockStored adds ``lora_name: str | None`` (no default) and the defaulted ``extra_keys``,
  ``group_idx``, ``kv_cache_spec_kind``, ``kv_cache_spec_sliding_window``; BlockRemoved adds
  ``group_idx``. The batch stays the array_like ``[ts, events, data_parallel_rank]`` (what
  vLLM v0.26 publishes, and what Dynamo and SGLang's routers were changed to expect alongside
  map events; the stored file at 0181ea3 shows EventBatch without array_like, which no release
  we found publishes: docs/events.md).
- ``llm_d_decode``: llm-d's KV cache library, ``pkg/kvevents/engineadapter/vllm_adapter.go``
  (commit 0d2ae54, Go, vmihailenco/msgpack v5) with the map events of its PR #661: the message
  is three frames, the topic ``kv@<pod>@<model>`` (anything else leaves no model: nothing is
  indexed), the sequence 8 bytes; the batch an array-encoded struct of exactly three fields
  (vmihailenco refuses an array whose length differs from the struct's field count); each event
  decoded to ``[]any`` (a map is turned into the positional list, absent fields nil), its tag
  one of the three (any other fails the batch); BlockStored then an array struct of exactly 8
  fields ``[tag, hashes, parent, token_ids []uint32, block_size int, lora_id *int, medium
  *string, lora_name *string]``, BlockRemoved of exactly 3 ``[tag, hashes, medium]``; hashes
  uint64, int64 or bytes. Its index keys on ``token_ids`` (it hashes tokens itself), tier the
  lower-cased medium.
- ``dynamo_decode``: NVIDIA Dynamo's ``lib/kv-router/src/zmq_wire.rs`` (commit 0cda21d, Rust,
  rmp-serde): the batch the tuple ``(f64, Vec<RawKvEvent>, Option<i32>)``, exactly three
  elements; an event a map (``type`` required; BlockStored needs ``block_hashes``, ``token_ids``,
  ``block_size``; unknown keys skipped) or a tagged sequence read field by field (lora_id
  dropped; up to three trailing fields of known types; the rest skipped); an unknown tag fails
  the batch; ``group_idx`` other than 0 or a non-attention ``kv_cache_spec_kind`` is ignored;
  a stored block keeps ``token_ids[offset:offset + block_size]`` and the blocks stop (unpublished)
  at one whose size is not the router's block size or whose tokens run out.
"""

import socket

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)
U64 = (0, 2 ** 64 - 1)
I64 = (-2 ** 63, 2 ** 63 - 1)
MSGSPEC_INT = (-2 ** 63, 2 ** 64 - 1)   # msgspec reads int64 and uint64
U32 = (0, 2 ** 32 - 1)
I32 = (-2 ** 31, 2 ** 31 - 1)
EVENT_TAGS = ("BlockStored", "BlockRemoved", "AllBlocksCleared")


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


def _unpack(payload):
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)


def _fail(what):
    raise AssertionError(what)


def _int_in(v, bounds, what):
    if not (isinstance(v, int) and not isinstance(v, bool)):
        _fail(f"{what}: not an integer: {v!r}")
    if not bounds[0] <= v <= bounds[1]:
        _fail(f"{what}: out of range: {v}")
    return v


def _opt(v, check):
    return None if v is None else check(v)


def _str(v, what):
    if not isinstance(v, str):
        _fail(f"{what}: not a string: {v!r}")
    return v


def _list(v, what):
    if not isinstance(v, list):
        _fail(f"{what}: not an array: {type(v).__name__}")
    return v


def _float(v, what):
    # msgspec and serde's f64 take a float or an integer; vmihailenco's DecodeFloat64 too.
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _fail(f"{what}: not a number: {v!r}")
    return float(v)


# -- vLLM (msgspec) -------------------------------------------------------------------------------

def _msgspec_hash(v, what):
    # ExternalBlockHash = bytes | int
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return _int_in(v, MSGSPEC_INT, what)


def _vllm_fields(tag, get):
    """Checks an event's fields through `get(name, required)`: msgspec's types per field."""
    if tag == "AllBlocksCleared":
        return ("AllBlocksCleared",)
    hashes = [_msgspec_hash(h, "block_hashes") for h in _list(get("block_hashes", True),
                                                            "block_hashes")]
    if tag == "BlockRemoved":
        medium = _opt(get("medium", True), lambda m: _str(m, "medium"))
        return ("BlockRemoved", hashes, medium)
    parent = _opt(get("parent_block_hash", True),
                  lambda p: _msgspec_hash(p, "parent_block_hash"))
    tokens = [_int_in(t, MSGSPEC_INT, "token_ids")
              for t in _list(get("token_ids", True), "token_ids")]
    size = _int_in(get("block_size", True), MSGSPEC_INT, "block_size")
    _opt(get("lora_id", True), lambda x: _int_in(x, MSGSPEC_INT, "lora_id"))
    medium = _opt(get("medium", True), lambda m: _str(m, "medium"))
    return ("BlockStored", hashes, parent, tokens, size, medium)


def _vllm_batch(payload):
    batch = _unpack(payload)
    if not isinstance(batch, list):
        _fail(f"EventBatch: Expected `array`, got `{type(batch).__name__}`")
    if len(batch) < 2:
        _fail(f"EventBatch: Expected `array` of at least length 2, got {len(batch)}")
    _float(batch[0], "EventBatch.ts")
    events = _list(batch[1], "EventBatch.events")
    if len(batch) > 2:
        _opt(batch[2], lambda r: _int_in(r, MSGSPEC_INT, "data_parallel_rank"))
    return events


def vllm_v0110_decode(payload):
    """The events of one batch as vLLM v0.11.0's ``KVEventBatch`` decoder reads them."""
    required = {"BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size",
                                "lora_id", "medium"),
                "BlockRemoved": ("block_hashes", "medium"), "AllBlocksCleared": ()}
    out = []
    for raw in _vllm_batch(payload):
        if not isinstance(raw, list):
            _fail(f"event: Expected `array`, got `{type(raw).__name__}`")
        if not raw or raw[0] not in EVENT_TAGS:
            _fail(f"event: Invalid value {raw[:1]!r} (no known tag first)")
        tag, names = raw[0], required[raw[0]]
        values = dict(zip(names, raw[1:]))  # extra trailing elements are ignored

        def get(name, needed, values=values, tag=tag):
            if name not in values:
                _fail(f"{tag}: Expected `array` of at least length {len(names) + 1}, got "
                      f"{len(values) + 1}")
            return values[name]
        out.append(_vllm_fields(tag, get))
    return out


def vllm_current_decode(payload):
    """The events of one batch as current vLLM's ``KVEventBatch`` decoder reads them."""
    out = []
    for raw in _vllm_batch(payload):
        if not isinstance(raw, dict):
            _fail(f"event: Expected `object`, got `{type(raw).__name__}`")
        if "type" not in raw:
            _fail("event: Object missing required field `type`")
        tag = raw["type"]
        if tag not in EVENT_TAGS:
            _fail(f"event: Invalid value {tag!r} - at `type`")

        def get(name, needed, raw=raw, tag=tag):
            if name not in raw:
                _fail(f"{tag}: Object missing required field `{name}`")
            return raw[name]
        event = _vllm_fields(tag, get)
        if tag == "BlockStored":
            _opt(get("lora_name", True), lambda n: _str(n, "lora_name"))
            _opt(raw.get("extra_keys"), lambda k: [_opt(e, lambda t: _list(t, "extra_keys"))
                                                   for e in _list(k, "extra_keys")])
            _opt(raw.get("kv_cache_spec_kind"), lambda k: _str(k, "kv_cache_spec_kind"))
            for key in ("group_idx", "kv_cache_spec_sliding_window"):
                _opt(raw.get(key), lambda x, key=key: _int_in(x, MSGSPEC_INT, key))
        elif tag == "BlockRemoved":
            _opt(raw.get("group_idx"), lambda x: _int_in(x, MSGSPEC_INT, "group_idx"))
        out.append(event)
    return out


# -- llm-d (Go, vmihailenco/msgpack v5) -----------------------------------------------------------

LLM_D_POSITIONS = {"BlockStored": ("type", "block_hashes", "parent_block_hash", "token_ids",
                                   "block_size", "lora_id", "medium", "lora_name"),
                   "BlockRemoved": ("type", "block_hashes", "medium")}


def _go_hash(v, what):
    if isinstance(v, (bytes, bytearray)):
        if not v:
            _fail(f"{what}: hash byte slice is empty")
        return int.from_bytes(bytes(v)[-8:].rjust(8, b"\0"), "big")
    if isinstance(v, int) and not isinstance(v, bool) and (I64[0] <= v <= U64[1]):
        return v % 2 ** 64
    _fail(f"{what}: unsupported hash type: {type(v).__name__}")


def _go_opt_int(v, what):
    return _opt(v, lambda x: _int_in(x, I64, what))


def _go_opt_str(v, what):
    return _opt(v, lambda x: _str(x, what))


def llm_d_decode(topic, payload):
    """(pod, model, events) as llm-d's vLLM adapter keeps them: events
    ``("stored", hashes, parent, tokens, tier)``, ``("removed", hashes, tier)``,
    ``("cleared",)``; tier lower-cased, ``gpu`` when the medium is nil."""
    parts = topic.decode() if isinstance(topic, bytes) else topic
    parts = parts.split("@")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        _fail(f"topic {topic!r}: not kv@<pod>@<model> (no model: nothing is indexed)")
    batch = _unpack(payload)
    if not isinstance(batch, list):
        _fail(f"failed to decode vLLM event batch: a {type(batch).__name__}, not an array")
    if len(batch) != 3:
        _fail("failed to decode vLLM event batch: number of fields in array-encoded struct "
              f"has changed ({len(batch)}, not 3)")
    _float(batch[0], "TS")
    events = _list(batch[1], "Events")
    _go_opt_int(batch[2], "DataParallelRank")
    out = []
    for raw in events:
        if isinstance(raw, dict):  # PR #661: a map becomes the positional list, absent: nil
            if not isinstance(raw.get("type"), str):
                _fail("malformed map event: no string type")
            raw = [raw.get(k) for k in LLM_D_POSITIONS.get(raw["type"], ("type",))]
        if not isinstance(raw, list):
            _fail(f"failed to decode tagged union: {type(raw).__name__}")
        if not raw:
            _fail("malformed tagged union: no tag")
        tag = raw[0]
        if not isinstance(tag, str):
            _fail(f"event tag is not a string: {tag!r}")
        if tag == "AllBlocksCleared":
            out.append(("cleared",))
            continue
        if tag not in ("BlockStored", "BlockRemoved"):
            _fail(f"unknown vLLM event tag: {tag}")
        fields = 8 if tag == "BlockStored" else 3
        if len(raw) != fields:
            _fail(f"failed to decode {tag} event: number of fields in array-encoded struct has "
                  f"changed ({len(raw)}, not {fields})")
        hashes = [_go_hash(h, "block hash") for h in (_list(raw[1], "BlockHashes")
                                                      if raw[1] is not None else [])]
        if tag == "BlockRemoved":
            medium = _go_opt_str(raw[2], "Medium")
            out.append(("removed", hashes, (medium or "gpu").lower()))
            continue
        parent = _opt(raw[2], lambda p: _go_hash(p, "parent hash"))
        tokens = [_int_in(t, U32, "TokenIds") for t in (_list(raw[3], "TokenIds")
                                                         if raw[3] is not None else [])]
        _int_in(raw[4] if raw[4] is not None else 0, I64, "BlockSize")
        _go_opt_int(raw[5], "LoraID")
        medium = _go_opt_str(raw[6], "Medium")
        _go_opt_str(raw[7], "LoraName")
        out.append(("stored", hashes, parent, tokens, (medium or "gpu").lower()))
    return parts[1], parts[2], out


# -- Dynamo (Rust, rmp-serde) ---------------------------------------------------------------------

_TIERS = {"GPU": "Device", "DEVICE": "Device", "CPU": "HostPinned", "CPU_PINNED": "HostPinned",
          "CPU_TIER1": "HostPinned", "CPU_TIER2": "Disk", "DISK": "Disk", "NVME": "Disk",
          "EXTERNAL": "External", "NETWORK": "External", "REMOTE": "External",
          "SHARED": "External"}
_MAIN_ATTENTION = ("full_attention", "mla_attention", "sink_full_attention")


def _rust_hash(v, what):
    # BlockHashValue: untagged i64 | u64
    if isinstance(v, int) and not isinstance(v, bool) and I64[0] <= v <= U64[1]:
        return v % 2 ** 64
    _fail(f"{what}: data did not match any variant of untagged enum BlockHashValue: {v!r}")


def _rust_tokens(v):
    v = _list(v, "token_ids")
    if all(isinstance(t, list) for t in v) and v:  # Bigram (EAGLE): first of each, last second
        return [_int_in(t[0], U32, "token_ids") for t in v] + [_int_in(v[-1][1], U32, "token_ids")]
    return [_int_in(t, U32, "token_ids") for t in v]


def _dynamo_event(raw):
    """(kind, fields) or ("ignored",), as RawKvEvent's deserializer reads it."""
    if isinstance(raw, dict):
        if "type" not in raw:
            _fail("missing field `type`")
        tag = _str(raw["type"], "type")
        get = raw.get
        ignore = (raw.get("group_idx") not in (None, 0)
                  or (raw.get("kv_cache_spec_kind") is not None
                      and raw["kv_cache_spec_kind"] not in _MAIN_ATTENTION))
        if tag == "BlockStored":
            for key in ("block_hashes", "token_ids", "block_size"):
                if key not in raw:
                    _fail(f"missing field `{key}`")
    elif isinstance(raw, list):
        if not raw or not isinstance(raw[0], str):
            _fail("sequence must start with event tag")
        tag = raw[0]
        names = {"BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size",
                                 "lora_id", "medium", "lora_name", "extra_keys"),
                 "BlockRemoved": ("block_hashes", "medium")}.get(tag, ())
        values = dict(zip(names, raw[1:]))
        trailing = raw[1 + len(names):1 + len(names) + (3 if tag == "BlockStored" else 2)]
        for t in trailing:  # Option<trailing field>: nil, a u32, a string, or a list
            if t is not None and not isinstance(t, (int, str, list)):
                _fail(f"{tag}: a trailing field of no known kind: {t!r}")
        if tag == "BlockStored":
            for i, key in ((1, "block_hashes"), (3, "token_ids"), (4, "block_size")):
                if values.get(key) is None:
                    _fail(f"invalid length {i}, expected missing {key}")
        if tag == "BlockRemoved" and values.get("block_hashes") is None:
            _fail("invalid length 1, expected missing block_hashes")
        get = values.get
        ignore = any((isinstance(t, int) and not isinstance(t, bool) and t != 0)
                     or (isinstance(t, str) and t not in _MAIN_ATTENTION) for t in trailing)
    else:
        _fail("a kv event encoded as a tagged map or sequence")
    if tag == "AllBlocksCleared":
        return ("cleared",)
    if tag == "Ignored":
        return ("ignored",)
    if tag not in ("BlockStored", "BlockRemoved"):
        _fail(f"unknown variant `{tag}`")
    hashes = [_rust_hash(h, "block_hashes") for h in _list(get("block_hashes"), "block_hashes")]
    medium = _opt(get("medium"), lambda m: _str(m, "medium"))
    if tag == "BlockRemoved":
        return ("ignored",) if ignore else ("removed", hashes, medium)
    parent = _opt(get("parent_block_hash"), lambda p: _rust_hash(p, "parent_block_hash"))
    tokens = _rust_tokens(get("token_ids"))
    size = _int_in(get("block_size"), U64, "block_size")
    _opt(get("lora_name"), lambda n: _str(n, "lora_name"))
    return ("ignored",) if ignore else ("stored", hashes, parent, tokens, size, medium)


def dynamo_decode(payload, kv_block_size):
    """The events of one batch as Dynamo's router converts them: dicts with ``kind``
    (stored, removed, cleared), ``tier`` and, for stored, ``parent`` and ``blocks`` [(hash,
    tokens)]. Fails where the router would fail or leave a stored block unpublished."""
    batch = _unpack(payload)
    if not isinstance(batch, list) or len(batch) != 3:
        _fail("invalid type/length: expected a tuple of size 3 (f64, Vec<RawKvEvent>, "
              f"Option<i32>), got {batch if not isinstance(batch, list) else len(batch)}")
    _float(batch[0], "ts")
    events = _list(batch[1], "events")
    _opt(batch[2], lambda r: _int_in(r, I32, "data_parallel_rank"))
    out = []
    for raw in events:
        e = _dynamo_event(raw)
        if e[0] == "ignored":
            continue
        if e[0] == "cleared":
            out.append({"kind": "cleared", "tier": "Device"})
            continue
        if e[0] == "removed":
            out.append({"kind": "removed", "hashes": e[1], "tier": _TIERS.get(e[2], "Device")})
            continue
        _, hashes, parent, tokens, size, medium = e
        seen = set() if parent is None else {parent}
        for h in hashes:
            if h in seen:
                _fail("Self-referencing block detected: duplicate hash in store event")
            seen.add(h)
        blocks, offset = [], 0
        for h in hashes:
            if size != kv_block_size:
                _fail(f"Block not published. Block size must be {kv_block_size} tokens, "
                      f"is {size}")
            if offset + size > len(tokens):
                _fail(f"Block not published. token_ids too short: need {offset + size}, got "
                      f"{len(tokens)}")
            blocks.append((h, tokens[offset:offset + size]))
            offset += size
        out.append({"kind": "stored", "parent": parent, "blocks": blocks,
                    "tier": _TIERS.get(medium, "Device")})
    return out
