"""``KvtierConnector``: a vLLM KV connector over kvtier serve's engine-owned device tier.

One class with both roles and the constructor and method signatures of vLLM v0.11.0's
``KVConnectorBase_V1`` (docs/vllm.md). vLLM loads it through its factory::

    --kv-transfer-config '{"kv_connector": "KvtierConnector", "kv_role": "kv_both",
        "kv_connector_module_path": "kvtier_client.vllm_connector",
        "kv_connector_extra_config": {"kvtier.endpoint": "tcp://127.0.0.1:5557",
            "kvtier.model": {"name": "llama-3-8b", "layers": 32, "kv_heads": 8,
                             "head_dim": 128, "kv_dtype": "bf16"}}}'

The scheduler role speaks protocol version 3 (docs/protocol.md): vLLM's KV cache manager owns
the device blocks and kvtier never allocates any; kvtier is told vLLM's block ids in each
admission and growth, loads its host and storage hits into them, and saves from them as its
write policy decides. The worker role is in vllm_worker.py.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .client import ENGINE_TIER_VERSION, Client, ModelShape, Prompt, StepWork, _hits
from .vllm_base import KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole
from .vllm_worker import KvtierWorkerSide


@dataclass
class KvtierConnectorMetadata(KVConnectorMetadata):
    """What one scheduler step hands the workers."""
    step: int = 0
    loads: Dict[str, List[Tuple[int, int]]] = field(default_factory=dict)  # [(block, position)]
    async_loads: Set[str] = field(default_factory=set)     # reported back by get_finished
    saves: Dict[str, List[int]] = field(default_factory=dict)  # blocks full after this step
    load_errors: Set[int] = field(default_factory=set)     # blocks vLLM must compute itself
    layer_ready_ns: List[int] = field(default_factory=list)


@dataclass
class _Request:
    rid: str
    req: int
    prompt: Prompt
    prompt_len: int
    lookup: Optional[Tuple[int, int]] = None       # (num_computed_tokens, call id) in flight
    offer: Tuple[int, int, bool] = (0, 0, False)   # local tokens, external tokens, async
    allocated: bool = False                        # kvtier knows it (allocate sent)
    loading: bool = False                          # kvtier's storage prefetch not yet landed
    admit_pending: bool = False                    # vLLM allocated blocks; kvtier not told
    running: bool = False                          # admitted at kvtier
    preempted: bool = False                        # vLLM let it go while kvtier had it running
    finishing: bool = False                        # request_finished came
    async_load: bool = False
    table: List[int] = field(default_factory=list)  # vLLM's block ids (group 0)
    sent: int = 0                                   # of them, how many kvtier holds
    admit_after: int = 0                            # the build from which it may be admitted
    scheduled_until: int = 0
    computed: int = 0                               # tokens reported computed to kvtier


def _u64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def extra_keys_of(request: Any) -> List[int]:
    """LoRA adapter, multimodal items and cache salt, mixed into every block's identity
    (docs/protocol.md, block identity): the same tokens under another adapter never match."""
    keys: List[int] = []
    lora = getattr(request, "lora_request", None)
    if lora is not None:
        keys.append(_u64(f"lora:{getattr(lora, 'lora_int_id', 0)}:"
                         f"{getattr(lora, 'lora_name', '')}"))
    features = getattr(request, "mm_features", None) or []
    hashes = [getattr(f, "identifier", None) for f in features]
    hashes += list(getattr(request, "mm_hashes", None) or [])
    keys += [_u64(f"mm:{h}") for h in hashes if h is not None]
    salt = getattr(request, "cache_salt", None)
    if salt:
        keys.append(_u64(f"salt:{salt}"))
    return keys


def _extra(vllm_config: Any) -> Dict[str, Any]:
    ktc = getattr(vllm_config, "kv_transfer_config", None)
    return dict(getattr(ktc, "kv_connector_extra_config", None) or {})


class KvtierConnector(KvtierWorkerSide, KVConnectorBase_V1):
    """vLLM's KV connector (both roles) over kvtier serve, protocol version 3."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config, role, kv_cache_config)
        extra = _extra(vllm_config)
        self._block_size = int(vllm_config.cache_config.block_size)
        self._lookup_wait_ms = int(extra.get("kvtier.lookup_wait_ms", 5))
        self._reqs: Dict[str, _Request] = {}
        self._next_req = 1
        self._builds = 0
        # Blocks reported computed whose contents kvtier may count on vLLM's device, and whether
        # vLLM keeps a freed block cached (its prefix cache) or drops it (docs/vllm.md).
        self._stored: Set[int] = set()
        self._fresh: List[int] = []  # block ids vLLM handed out as new since the last step
        self._caching = bool(getattr(vllm_config.cache_config, "enable_prefix_caching", True))
        self._client: Optional[Client] = None
        self._init_worker()
        if role == KVConnectorRole.SCHEDULER:
            client = extra.get("kvtier.client")  # an open Client (tests); else connect
            self._client = client or Client(
                str(extra.get("kvtier.endpoint", "tcp://127.0.0.1:5557")),
                extra.get("kvtier.token"),
                server_key=extra.get("kvtier.curve_server_key_file"),
                client_secret_key=extra.get("kvtier.curve_key_file"))
            m = extra["kvtier.model"]
            hello = self._client.hello(
                ModelShape(m["name"], int(m["layers"]), int(m["kv_heads"]),
                           int(m["head_dim"]), m.get("kv_dtype", "bf16")),
                self._block_size, name=str(extra.get("kvtier.name", "vllm")),
                versions=(ENGINE_TIER_VERSION,))
            if hello.version != ENGINE_TIER_VERSION:
                raise RuntimeError(f"kvtier serve chose protocol {hello.version}, not 3")

    # -- requests --------------------------------------------------------------------------------

    def _request(self, request: Any) -> _Request:
        rid = request.request_id
        r = self._reqs.get(rid)
        if r is None:
            tokens = list(request.prompt_token_ids)
            r = _Request(rid, self._next_req,
                         Prompt(tokens=tokens, extra_keys=extra_keys_of(request) or None),
                         len(tokens))
            self._next_req += 1
            self._reqs[rid] = r
        return r

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self._block_size)

    # -- scheduler role --------------------------------------------------------------------------

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int
                                   ) -> Tuple[Optional[int], bool]:
        """Tokens kvtier can load past vLLM's own prefix. Side-effect free at vLLM and kvtier
        (a ``lookup`` takes nothing); ``(None, False)`` while kvtier's answer, which may ask
        storage, has not come: vLLM asks again next step."""
        r = self._request(request)
        if r.running:
            r.preempted = True  # waiting again at vLLM: it was preempted
        if r.lookup is None or r.lookup[0] != num_computed_tokens:
            call = self._client.send("lookup", computed_tokens=int(num_computed_tokens),
                                     **r.prompt.to_wire())
            r.lookup = (num_computed_tokens, call)
            if self._lookup_wait_ms == 0:  # never wait: the answer is taken next step
                return None, False
        reply = self._client.poll(r.lookup[1], self._lookup_wait_ms)
        if reply is None:
            return None, False
        r.lookup = None
        hits = _hits(reply)
        bs = self._block_size
        # vLLM computes at least the prompt's last token; kvtier's hits are whole blocks.
        room = max(0, r.prompt_len - 1 - num_computed_tokens)
        n = min(hits.host_tokens + hits.storage_tokens, room)
        n = max(0, (num_computed_tokens + n) // bs * bs - num_computed_tokens)
        load_async = n > 0 and hits.storage_blocks > 0
        r.offer = (num_computed_tokens, n, load_async)
        return n, load_async

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int):
        """vLLM allocated ``blocks`` for the request: kvtier is told their ids when the step is
        built; a request kvtier does not know yet is registered (its storage prefetch starts)."""
        r = self._request(request)
        ids = blocks.get_block_ids() if hasattr(blocks, "get_block_ids") else blocks
        r.table = list(ids[0]) if ids and isinstance(ids[0], (list, tuple)) else list(ids or [])
        if r.running:  # its asynchronous load landed: now scheduled, it grows
            return
        self._fresh += r.table[r.offer[0] // self._block_size:]  # past vLLM's own prefix
        local, offered, load_async = r.offer
        r.offer = (local, num_external_tokens, load_async and num_external_tokens > 0)
        r.async_load = r.offer[2]
        r.admit_pending = True
        # An asynchronous load is admitted with the next step built, so that it spans steps as
        # vLLM expects (WAITING_FOR_REMOTE_KVS until get_finished reports it).
        r.admit_after = self._builds + (1 if r.async_load else 0)
        if not r.allocated:
            alloc = self._client.allocate(r.req, r.prompt)
            r.allocated, r.loading = True, not alloc.ready

    def _poll_loading(self, r: _Request) -> None:
        if r.loading:
            r.loading = not self._client.allocate(r.req).ready

    def build_connector_meta(self, scheduler_output: Any) -> KvtierConnectorMetadata:
        """One kvtier ``step`` per vLLM step: KV computed since the last one, the finished and
        preempted requests, growths and admissions with vLLM's block ids."""
        meta = KvtierConnectorMetadata()
        work = StepWork()
        scheduled = dict(getattr(scheduler_output, "num_scheduled_tokens", {}) or {})
        for rid in getattr(scheduler_output, "preempted_req_ids", None) or ():
            if rid in self._reqs and self._reqs[rid].running:
                self._reqs[rid].preempted = True
        for r in list(self._reqs.values()):
            self._poll_loading(r)
            self._report(r, work, meta)
        self._add_growth(work, scheduler_output, scheduled)
        admitted = self._add_admissions(work, scheduled)
        self._report_evictions(work)
        if work.to_wire():
            reply = self._client.step(work)
            meta.step = reply.step
            meta.layer_ready_ns = reply.layer_ready_ns
            self._settle(reply, admitted, meta)
        self._builds += 1
        return meta

    def _report(self, r: _Request, work: StepWork, meta: KvtierConnectorMetadata) -> None:
        """What became of a request since the last step: KV computed, finished (once no
        storage load is pending at kvtier), preempted (kvtier saves what its mode says)."""
        if r.running and not r.preempted and r.scheduled_until > r.computed:
            work.computed.append((r.req, r.scheduled_until))
            meta.saves[r.rid] = r.table[r.computed // self._block_size:
                                        r.scheduled_until // self._block_size]
            self._stored.update(meta.saves[r.rid])
            r.computed = r.scheduled_until
        if r.finishing and not r.loading:
            if r.allocated:
                work.finished.append(r.req)
                self._drop_uncached(r, work)
            if r.lookup is not None:
                self._client.forget(r.lookup[1])
            del self._reqs[r.rid]
            return
        if r.preempted:
            if r.running:  # the KV of its last step exists: what preemption may save
                work.preempted.append((r.req, r.scheduled_until))
                self._drop_uncached(r, work)
            r.running, r.preempted, r.sent, r.scheduled_until, r.computed = False, False, 0, 0, 0

    def _drop_uncached(self, r: _Request, work: StepWork) -> None:
        """Without prefix caching vLLM keeps nothing it frees: a released request's blocks
        are gone from its device."""
        if not self._caching:
            work.evicted += [b for b in r.table[:r.sent] if b in self._stored]
            self._stored.difference_update(r.table[:r.sent])

    def _report_evictions(self, work: StepWork) -> None:
        """vLLM v0.11.0 tells a connector of no eviction (its BlockRemoved events go to its
        own publisher); it evicts a cached block only to hand its id out again. So a block id
        vLLM gives a request as a new block (an allocation past vLLM's own prefix, a growth)
        that kvtier was told holds KV is reported ``evicted`` in the step built next, before
        the growth or admission that names it (docs/vllm.md)."""
        # A block some request still runs with at kvtier is never named (a preemption vLLM has
        # not told of yet): kvtier refuses such a report.
        held = {b for x in self._reqs.values() if x.running and not x.preempted
                for b in x.table[:x.sent]}
        for b in self._fresh:
            if b in self._stored and b not in held:
                work.evicted.append(b)
                self._stored.discard(b)
        self._fresh = []

    def _add_growth(self, work: StepWork, out: Any, scheduled: Dict[str, int]) -> None:
        for rid, ids, whole, computed in _scheduled_requests(out):
            r = self._reqs.get(rid)
            if r is None or not r.running:
                continue
            if ids is not None:
                r.table = list(ids) if whole else r.table + list(ids)
                self._fresh += [] if whole else list(ids)
            tokens = computed + scheduled.get(rid, 0)
            new = r.table[r.sent:self._blocks(tokens)]
            if tokens <= r.scheduled_until and not new:
                continue
            work.grows.append((r.req, tokens))
            work.grow_blocks[r.req] = new
            r.sent += len(new)
            r.scheduled_until = tokens

    def _add_admissions(self, work: StepWork, scheduled: Dict[str, int]) -> Dict[int, _Request]:
        admitted: Dict[int, _Request] = {}
        for r in self._reqs.values():
            if not r.admit_pending or r.loading or r.finishing or self._builds < r.admit_after:
                continue
            local, external, _ = r.offer
            # An asynchronous load covers the loaded tokens only: vLLM schedules the rest once
            # get_finished reports it.
            tokens = local + external + (0 if r.async_load else scheduled.get(r.rid, 0))
            if tokens == 0 or self._blocks(tokens) > len(r.table):
                continue
            work.admits.append((r.req, tokens))
            work.admit_blocks[r.req] = r.table[:self._blocks(tokens)]
            admitted[r.req] = r
            r.scheduled_until = local + external if r.async_load else tokens
        return admitted

    def _settle(self, reply: Any, admitted: Dict[int, _Request],
                meta: KvtierConnectorMetadata) -> None:
        bs = self._block_size
        for a in reply.admits:
            r = admitted.get(a.req)
            if r is None:
                continue
            local, external, _ = r.offer
            want = list(range(local // bs, (local + external) // bs))
            if not a.admitted:
                # kvtier could not take it this step: vLLM computes what it would have loaded.
                if not r.async_load:
                    meta.load_errors |= {r.table[p] for p in want}
                    r.admit_pending = False
                continue
            r.admit_pending, r.running, r.sent = False, True, self._blocks(r.scheduled_until)
            r.computed = local  # vLLM's own prefix is in its blocks already
            loaded = set(a.load_blocks)
            meta.loads[r.rid] = [(r.table[p], p) for p in want if r.table[p] in loaded]
            meta.load_errors |= {r.table[p] for p in want if r.table[p] not in loaded}
            if r.async_load:
                meta.async_loads.add(r.rid)

    def update_connector_output(self, connector_output: Any) -> None:
        for rid in getattr(connector_output, "finished_recving", None) or ():
            if rid in self._reqs:
                self._reqs[rid].async_load = False

    def request_finished(self, request: Any, block_ids: List[int]
                         ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        """Finished or aborted (a pending load included): kvtier releases it with the next
        step. vLLM may free the blocks at once: kvtier writes an engine block only during the
        step that admitted it, and reads it for saves when it is reported computed."""
        r = self._reqs.get(request.request_id)
        if r is not None:
            r.finishing = True
        return False, None

    def take_events(self) -> Iterable[Any]:
        # kvtier publishes its block index's events itself (docs/events.md).
        return ()

    def shutdown(self) -> None:
        if self._client is not None:
            try:
                self._client.bye()
            finally:
                self._client.close()
                self._client = None


def _scheduled_requests(out: Any) -> List[Tuple[str, Optional[List[int]], bool, int]]:
    """(request id, block ids of group 0, whether they are its whole table, its
    num_computed_tokens) of every request scheduled in a step: ``scheduled_new_reqs`` carry
    their whole table; ``scheduled_cached_reqs`` their new blocks, or (resumed from preemption)
    their whole table again."""
    rows: List[Tuple[str, Optional[List[int]], bool, int]] = []
    for n in getattr(out, "scheduled_new_reqs", None) or ():
        rows.append((n.req_id, list(n.block_ids[0]) if n.block_ids else [], True,
                     int(n.num_computed_tokens)))
    cached = getattr(out, "scheduled_cached_reqs", None)
    if cached is not None:
        for i, rid in enumerate(cached.req_ids):
            new = cached.new_block_ids[i]
            rows.append((rid, list(new[0]) if new else None,
                         bool(cached.resumed_from_preemption[i]),
                         int(cached.num_computed_tokens[i])))
    return rows
