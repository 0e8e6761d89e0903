"""A typed client of every verb of kvtier serve's protocol (docs/protocol.md).

One DEALER socket, one call at a time: each call sends a msgpack map and waits for the reply
that carries its ``id``. A reply with ``ok: false`` raises ``KvtierError`` with the server's
error kind and message.
"""

from __future__ import annotations

import errno
import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import msgpack
from .transport import zmq

PROTOCOL_VERSION = 1
# The engine-owned device tier (docs/protocol.md, version 3): the engine's KV cache manager owns
# the device blocks and names them; kvtier loads into them from host memory and storage.
ENGINE_TIER_VERSION = 3


class KvtierError(Exception):
    """The server answered ``ok: false``."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass
class ModelShape:
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    kv_dtype: str = "bf16"
    latent_dim: int = 0  # MLA: the latent one layer caches per token (no K and V per head)
    # MLA: the latent's parts, as kvtier's model.kv_lora_rank and model.rope_head_dim name them;
    # given, the server names the one that differs (docs/protocol.md, hello)
    kv_lora_rank: int = 0
    rope_head_dim: int = 0

    def to_wire(self) -> Dict[str, Any]:
        out = {"name": self.name, "layers": self.layers, "kv_heads": self.kv_heads,
               "head_dim": self.head_dim, "kv_dtype": self.kv_dtype}
        latent = self.latent_dim or (self.kv_lora_rank + self.rope_head_dim)
        if latent:
            out["latent_dim"] = latent
        if self.kv_lora_rank:
            out["kv_lora_rank"] = self.kv_lora_rank
            out["rope_head_dim"] = self.rope_head_dim
        return out


@dataclass
class Prompt:
    """A request's prompt in one of the protocol's three forms (exactly one is set)."""
    tokens: Optional[Sequence[int]] = None
    extra_keys: Optional[Sequence[int]] = None
    hashes: Optional[Sequence[int]] = None
    blocks: Optional[Sequence[Tuple[int, int]]] = None  # (hash, tokens); the last may be partial

    def to_wire(self) -> Dict[str, Any]:
        given = [k for k in ("tokens", "hashes", "blocks") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a prompt has exactly one of tokens, hashes, blocks; got {given}")
        if self.tokens is not None:
            out: Dict[str, Any] = {"tokens": list(self.tokens)}
            if self.extra_keys:
                out["extra_keys"] = list(self.extra_keys)
            return out
        if self.hashes is not None:
            return {"hashes": list(self.hashes)}
        return {"blocks": [[int(h), int(t)] for h, t in self.blocks]}


@dataclass
class Hello:
    version: int
    engine: int
    block_size: int
    layers: int
    device_blocks: int
    host_blocks: int
    tiers: List[str]
    now_ns: int
    speed: float
    device_owner: str = "kvtier"  # "engine" with version 3


@dataclass
class Hits:
    """Blocks and tokens of a prompt held per tier (a contiguous prefix: device, host, storage)."""
    device_blocks: int = 0
    host_blocks: int = 0
    storage_blocks: int = 0
    device_tokens: int = 0
    host_tokens: int = 0
    storage_tokens: int = 0

    @property
    def blocks(self) -> int:
        return self.device_blocks + self.host_blocks + self.storage_blocks

    @property
    def tokens(self) -> int:
        return self.device_tokens + self.host_tokens + self.storage_tokens


_HIT_KEYS = tuple(Hits.__dataclass_fields__)


def _hits(reply: Dict[str, Any]) -> Hits:
    return Hits(**{k: int(reply.get(k, 0)) for k in _HIT_KEYS})


@dataclass
class Allocation:
    state: str                      # "ready" or "pending"
    prefetched_blocks: int = 0
    available_blocks: int = 0

    @property
    def ready(self) -> bool:
        return self.state == "ready"


@dataclass
class Match:
    req: int
    device_blocks: int
    host_blocks: int
    device_tokens: int
    host_tokens: int
    idle_device_blocks: int


@dataclass
class ProbeReply:
    step: int
    available_blocks: int
    matches: List[Match]
    victim_frees: List[int]


@dataclass
class Admission:
    req: int
    admitted: bool
    hits: Hits
    load_blocks: List[int] = field(default_factory=list)  # version 3: the engine's blocks loaded


@dataclass
class StepReply:
    step: int
    admits: List[Admission]
    failed_grows: List[int]
    available_blocks: int
    layer_ready_ns: List[int]
    now_ns: int
    # Real mode: the step's swap-in into the engine's tensors ({slot, record, layers, blocks}),
    # whose per-layer completion the worker waits for; None: nothing swapped in.
    swap_in: Optional[Dict[str, Any]] = None


def _step_reply(r: Dict[str, Any]) -> StepReply:
    admits = [Admission(int(a["req"]), bool(a["admitted"]), _hits(a),
                        [int(b) for b in a.get("load_blocks", [])]) for a in r.get("admits", [])]
    return StepReply(int(r.get("step", 0)), admits, [int(x) for x in r.get("failed_grows", [])],
                     int(r.get("available_blocks", 0)), [int(x) for x in r.get("layer_ready_ns", [])],
                     int(r.get("now_ns", 0)), r.get("swap_in"))


@dataclass
class StepWork:
    """One engine step's block work (``step``'s lists), applied in the protocol's order."""
    computed: List[Tuple[int, int]] = field(default_factory=list)
    finished: List[int] = field(default_factory=list)
    # (req, tokens): tokens of its KV computed, what scheduler.preemption saves (0: nothing)
    preempted: List[Tuple[int, int]] = field(default_factory=list)
    grows: List[Tuple[int, int]] = field(default_factory=list)
    admits: List[Tuple[int, int]] = field(default_factory=list)
    # Version 3: the engine's device block ids per request, for its `admits` (its whole table)
    # and `grows` (the new blocks) entries.
    admit_blocks: Dict[int, List[int]] = field(default_factory=dict)
    grow_blocks: Dict[int, List[int]] = field(default_factory=dict)
    # Version 3: device block ids whose contents the engine dropped since its last step.
    evicted: List[int] = field(default_factory=list)

    def to_wire(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for k in ("computed", "preempted", "grows", "admits"):
            pairs = getattr(self, k)
            ids = {"admits": self.admit_blocks, "grows": self.grow_blocks}.get(k, {})
            if pairs:
                out[k] = [[int(a), int(b)] + ([[int(x) for x in ids[a]]] if a in ids else [])
                          for a, b in pairs]
        if self.finished:
            out["finished"] = [int(x) for x in self.finished]
        if self.evicted:
            out["evicted"] = [int(x) for x in self.evicted]
        return out


def _checked(reply: Dict[str, Any]) -> Dict[str, Any]:
    if not reply.get("ok", False):
        raise KvtierError(str(reply.get("error", "?")), str(reply.get("message", "")))
    return reply


def read_curve_key(path: str) -> bytes:
    """A CURVE key from the first line of ``path`` (40 characters of Z85, as
    ``tools/curve-keys`` writes it)."""
    with open(path, "rb") as f:
        key = f.readline().strip()
    if len(key) != 40:
        raise ValueError(f"{path}: does not start with a CURVE key (40 characters of Z85)")
    _pyzmq("a CURVE key").utils.z85.decode(key)  # raises on what is not Z85
    return key


def _pyzmq(what: str) -> Any:
    """pyzmq itself: CURVE's keys and socket options are not in transport's ctypes stand-in."""
    try:
        import zmq as pyzmq  # type: ignore
        import zmq.utils.z85  # noqa: F401  (type: ignore)
    except ImportError:
        raise RuntimeError(f"{what} needs pyzmq (Debian: python3-zmq), which is not installed")
    return pyzmq


class Client:
    """A connection to ``kvtier serve``. ``hello`` registers the engine the other verbs name.

    ``server_key``: the server's CURVE public key (Z85 bytes, or a file holding it), for a server
    with ``--curve-key-file``: every frame is then encrypted, and only that server can answer.
    ``client_secret_key``: this client's CURVE secret key (Z85 bytes, or a file), for a server
    that admits listed keys only; without it a fresh key pair is made."""

    def __init__(self, endpoint: str = "tcp://127.0.0.1:5557", token: Optional[str] = None,
                 timeout_ms: int = 30000, context: Optional[zmq.Context] = None,
                 server_key: Optional[Any] = None, client_secret_key: Optional[Any] = None):
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        # A DEALER whose connection never completes (a CURVE handshake the server refused)
        # blocks on send: the call's timeout bounds the send too.
        self._sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
        if server_key is not None:
            self._curve(server_key, client_secret_key)
        elif client_secret_key is not None:
            raise ValueError("client_secret_key needs server_key (whom to talk to)")
        self._sock.connect(endpoint)
        self._token = token
        self._timeout_ms = timeout_ms
        self._ids = itertools.count(1)
        self.engine: Optional[int] = None
        self.step_number = 0
        self._outstanding: Dict[int, Optional[Dict[str, Any]]] = {}  # sent without waiting

    def _curve(self, server_key: Any, client_secret_key: Optional[Any]) -> None:
        def key_of(k: Any) -> bytes:
            if isinstance(k, (bytes, bytearray)) and len(k) == 40:
                return bytes(k)
            return read_curve_key(str(k))
        pyzmq = _pyzmq("kvtier serve over CURVE")
        if client_secret_key is None:
            public, secret = pyzmq.curve_keypair()
        else:
            secret = key_of(client_secret_key)
            public = pyzmq.curve_public(secret)
        self._sock.curve_serverkey = key_of(server_key)
        self._sock.curve_publickey = public
        self._sock.curve_secretkey = secret

    def close(self) -> None:
        self._sock.close(0)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the wire --------------------------------------------------------------------------------

    def call(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Sends one call and returns the reply's map; raises KvtierError on ``ok: false``."""
        msg: Dict[str, Any] = {"op": op, "id": next(self._ids)}
        if self._token is not None:
            msg["token"] = self._token
        if self.engine is not None and op not in ("hello", "stats"):
            msg["engine"] = self.engine
        msg.update(fields)
        return self.call_raw(msgpack.packb(msg, use_bin_type=True), msg["id"])

    def call_raw(self, frame: bytes, call_id: Optional[int] = None) -> Dict[str, Any]:
        """Sends bytes as they are (tests of bad messages) and returns the reply's map."""
        self._send(frame)
        while True:
            reply = self._receive(self._timeout_ms)
            if reply is None:
                raise TimeoutError(f"no reply within {self._timeout_ms} ms")
            if call_id is not None and reply.get("id") != call_id:
                continue  # the late answer of an earlier call that timed out, or one sent
            return _checked(reply)

    def _receive(self, timeout_ms: int) -> Optional[Dict[str, Any]]:
        """The next reply; one of a call sent without waiting is kept for ``poll``."""
        if not self._sock.poll(timeout_ms):
            return None
        reply = msgpack.unpackb(self._sock.recv_multipart()[-1], raw=False,
                                strict_map_key=False)
        if reply.get("id") in self._outstanding:
            self._outstanding[reply["id"]] = reply
        return reply

    def send(self, op: str, **fields: Any) -> int:
        """Sends a call without waiting for its reply; ``poll`` takes the reply."""
        msg: Dict[str, Any] = {"op": op, "id": next(self._ids)}
        if self._token is not None:
            msg["token"] = self._token
        if self.engine is not None:
            msg["engine"] = self.engine
        msg.update(fields)
        self._send(msgpack.packb(msg, use_bin_type=True))
        self._outstanding[msg["id"]] = None
        return msg["id"]

    def _send(self, frame: bytes) -> None:
        try:
            self._sock.send_multipart([frame])
        except zmq.ZMQError as e:
            if getattr(e, "errno", None) != errno.EAGAIN:
                raise
            raise TimeoutError(f"could not send within {self._timeout_ms} ms: no connection "
                               "to the server (a refused CURVE handshake, or none listening)"
                               ) from None

    def poll(self, call_id: int, timeout_ms: int = 0) -> Optional[Dict[str, Any]]:
        """The reply of a call ``send`` sent, once it came (raises KvtierError if refused);
        None while it has not."""
        while self._outstanding.get(call_id) is None:
            if self._receive(timeout_ms) is None:
                return None
        return _checked(self._outstanding.pop(call_id))

    def forget(self, call_id: int) -> None:
        """A call ``send`` sent whose reply nobody will take."""
        self._outstanding.pop(call_id, None)

    # -- verbs -----------------------------------------------------------------------------------

    def hello(self, model: ModelShape, block_size: int, name: str = "python",
              tiers: Optional[Sequence[str]] = None,
              versions: Sequence[int] = (PROTOCOL_VERSION,),
              config: Optional[Dict[str, str]] = None) -> Hello:
        """``config``: values the engine runs with that the server must share, by key, as JSON
        text (``{"cache.device_blocks": "4096"}``); refused with ``config_mismatch`` naming the
        first that differs (docs/protocol.md, "hello")."""
        fields: Dict[str, Any] = {"versions": list(versions), "name": name,
                                  "model": model.to_wire(), "block_size": block_size}
        if tiers is not None:
            fields["tiers"] = list(tiers)
        if config:
            fields["config"] = {str(k): str(v) for k, v in config.items()}
        r = self.call("hello", **fields)
        self.engine = int(r["engine"])
        return Hello(int(r["version"]), int(r["engine"]), int(r["block_size"]), int(r["layers"]),
                     int(r["device_blocks"]), int(r["host_blocks"]), list(r.get("tiers", [])),
                     int(r.get("now_ns", 0)), float(r.get("speed", 1.0)),
                     str(r.get("device_owner", "kvtier")))

    def lookup(self, prompt: Prompt, computed_tokens: Optional[int] = None) -> Hits:
        """``computed_tokens`` (version 3): the engine's own device prefix; the hits are
        counted after it, in host memory and storage only."""
        fields = prompt.to_wire()
        if computed_tokens is not None:
            fields["computed_tokens"] = int(computed_tokens)
        return _hits(self.call("lookup", **fields))

    def allocate(self, req: int, prompt: Optional[Prompt] = None) -> Allocation:
        """Registers ``req`` (with its prompt) or asks again about a pending one (without)."""
        fields: Dict[str, Any] = {"req": req}
        if prompt is not None:
            fields.update(prompt.to_wire())
        r = self.call("allocate", **fields)
        return Allocation(str(r["state"]), int(r.get("prefetched_blocks", 0)),
                          int(r.get("available_blocks", 0)))

    def wait(self, req: int) -> Allocation:
        r = self.call("wait", req=req)
        return Allocation("ready", int(r.get("prefetched_blocks", 0)),
                          int(r.get("available_blocks", 0)))

    def probe(self, candidates: Sequence[int], grow_blocks: int = 0,
              victims: Sequence[int] = (), step: Optional[int] = None) -> ProbeReply:
        r = self.call("probe", step=self.step_number + 1 if step is None else step,
                      candidates=list(candidates), grow_blocks=grow_blocks, victims=list(victims))
        matches = [Match(int(m["req"]), int(m["device_blocks"]), int(m["host_blocks"]),
                         int(m["device_tokens"]), int(m["host_tokens"]),
                         int(m["idle_device_blocks"])) for m in r.get("matches", [])]
        return ProbeReply(int(r.get("step", 0)), int(r.get("available_blocks", 0)), matches,
                          [int(x) for x in r.get("victim_frees", [])])

    def step(self, work: StepWork) -> StepReply:
        self.step_number += 1
        return _step_reply(self.call("step", step=self.step_number, **work.to_wire()))

    def _shorthand(self, op: str, **fields: Any) -> StepReply:
        reply = _step_reply(self.call(op, **fields))
        self.step_number = max(self.step_number, reply.step)
        return reply

    def commit(self, req: int, tokens: int) -> StepReply:
        return self._shorthand("commit", req=req, tokens=tokens)

    def save(self, req: int, tokens: int) -> StepReply:
        return self._shorthand("save", req=req, tokens=tokens)

    def free(self, req: int) -> StepReply:
        return self._shorthand("free", req=req)

    def preempt(self, req: int, tokens: int = 0) -> StepReply:
        """``tokens``: of its KV computed, what the server's preemption mode saves (0: none)."""
        return self._shorthand("preempt", req=req, tokens=tokens)

    def finish(self, req: int) -> StepReply:
        return self._shorthand("finish", req=req)

    def stats(self) -> Dict[str, Any]:
        return self.call("stats")

    def ping(self) -> int:
        return int(self.call("ping")["now_ns"])

    def bye(self) -> int:
        released = int(self.call("bye")["released"])
        self.engine = None
        return released
