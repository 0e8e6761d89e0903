"""``KvtierConnector``: a vLLM KV connector over kvtier serve's engine-owned device tier.

One class with both roles, for vLLM v0.11.0 and for the later releases read (docs/vllm.md):
what differs is found by feature detection (vllm_compat.py), never by a version number. vLLM
loads it through its factory::

    --kv-transfer-config '{"kv_connector": "KvtierConnector", "kv_role": "kv_both",
        "kv_connector_module_path": "kvtier_client.vllm_connector",
        "kv_connector_extra_config": {"kvtier.endpoint": "tcp://127.0.0.1:5557",
            "kvtier.model": {"name": "llama-3-8b", "layers": 32, "kv_heads": 8,
                             "head_dim": 128, "kv_dtype": "bf16"}}}'

The scheduler role speaks protocol version 3 (docs/protocol.md): vLLM's KV cache manager owns
the device blocks and kvtier never allocates any; kvtier is told vLLM's block ids in each
admission and growth, loads its host and storage hits into them, and saves from them as its
write policy decides. The worker role is in vllm_worker.py.

Admission. kvtier admits a request in the step vLLM schedules it, with the tokens vLLM computes
in that step: a hit loaded synchronously is offered only once kvtier has registered the request
(``allocate`` answered ready), so its admission never waits for a later step; a storage hit is
loaded asynchronously (vLLM's ``WAITING_FOR_REMOTE_KVS``) and admitted once its storage loads
have landed. Every offered block is loaded or reported in ``get_block_ids_with_load_errors``, in
the step that loads it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .client import ENGINE_TIER_VERSION, Client, KvtierError, ModelShape, Prompt, StepWork, _hits
from .vllm_base import KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole
from .vllm_compat import (kv_cache_groups, model_facts, preempted_ids, scheduled_requests,
                          group0)
from .real_data_path import data_path_of
from .vllm_worker import KvtierConnectorStats, KvtierWorkerSide

log = logging.getLogger(__name__)


class KvtierConfigError(ValueError):
    """vLLM's config and kvtier's disagree; the message names the key."""


@dataclass
class KvtierConnectorMetadata(KVConnectorMetadata):
    """What one scheduler step hands the workers (picklable: it crosses processes)."""
    step: int = 0
    loads: Dict[str, List[Tuple[int, int]]] = field(default_factory=dict)  # [(block, position)]
    async_loads: Set[str] = field(default_factory=set)   # reported in finished_recving
    recv_done: Set[str] = field(default_factory=set)     # owed finished_recving, nothing to load
    saves: Dict[str, List[int]] = field(default_factory=dict)  # blocks computed last step
    load_errors: Set[int] = field(default_factory=set)   # blocks vLLM computes itself
    preempted: Set[str] = field(default_factory=set)     # told to kvtier this step
    layer_ready_ns: List[int] = field(default_factory=list)
    swap_in: Optional[Dict[str, Any]] = None  # real mode: the swap-in the workers wait for


@dataclass
class _Request:
    rid: str
    req: int
    prompt: Prompt
    prompt_len: int
    lookup: Optional[Tuple[int, int]] = None       # (num_computed_tokens, call id) in flight
    alloc_call: Optional[int] = None               # an allocate sent without waiting
    registered: bool = False                       # kvtier knows it (allocate sent)
    ready: bool = False                            # its storage loads have landed at kvtier
    prefetched: bool = False                       # ... and brought blocks from storage
    offer: Tuple[int, int, bool] = (0, 0, False)   # local tokens, external tokens, async
    admit_now: bool = False                        # admitted in the step being built
    waiting_load: bool = False                     # async: vLLM waits for its KV
    recv_owed: bool = False                        # vLLM must hear finished_recving once
    running: bool = False                          # admitted at kvtier
    preempted: bool = False                        # vLLM let it go while kvtier had it running
    preempted_now: bool = False                    # ... in the step being built (its KV intact)
    finishing: bool = False                        # request_finished came
    table: List[int] = field(default_factory=list)  # vLLM's block ids (group 0)
    sent: int = 0                                   # of them, how many kvtier holds
    scheduled_until: int = 0                        # tokens whose KV the step being run makes
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


def check_model(model: Dict[str, Any], facts: Dict[str, Any]) -> None:
    """kvtier.model against what vLLM's config says of the model's KV; raises naming the key."""
    for key in ("layers", "kv_heads", "head_dim", "kv_dtype"):
        if key in facts and key in model and str(model[key]) != str(facts[key][0]):
            raise KvtierConfigError(
                f"kvtier.model.{key} is {model[key]!r} but vLLM's model has {facts[key][0]!r} "
                f"({facts[key][1]}): set kvtier.model (and kvtier serve's model.*) to vLLM's")


class KvtierConnector(KvtierWorkerSide, KVConnectorBase_V1):
    """vLLM's KV connector (both roles) over kvtier serve, protocol version 3."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config, role, kv_cache_config)
        extra = _extra(vllm_config)
        groups = kv_cache_groups(kv_cache_config)
        if groups != 1:
            # Not SupportsHMA: vLLM turns its hybrid allocator off for such a connector unless
            # asked to keep it; kvtier's blocks are one group's (docs/vllm.md).
            raise KvtierConfigError(
                f"KvtierConnector handles one KV cache group; vLLM's cache has {groups} (the "
                "hybrid KV cache manager is on): start vLLM with "
                "--disable-hybrid-kv-cache-manager, or use a model with one attention type")
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
        self._stats = KvtierConnectorStats()
        self._client: Optional[Client] = None
        self._init_worker(data_path_of(extra, self._block_size))
        if role == KVConnectorRole.SCHEDULER:
            self._hello(vllm_config, kv_cache_config, extra)

    def _hello(self, vllm_config: Any, kv_cache_config: Any, extra: Dict[str, Any]) -> None:
        if "kvtier.model" not in extra:
            raise KvtierConfigError("kv_connector_extra_config lacks kvtier.model (the model "
                                    "kvtier serve serves: name, layers, kv_heads, head_dim, "
                                    "kv_dtype)")
        m = extra["kvtier.model"]
        facts = model_facts(vllm_config, kv_cache_config)
        check_model(m, facts)
        client = extra.get("kvtier.client")  # an open Client (tests); else connect
        self._client = client or Client(
            str(extra.get("kvtier.endpoint", "tcp://127.0.0.1:5557")), extra.get("kvtier.token"),
            server_key=extra.get("kvtier.curve_server_key_file"),
            client_secret_key=extra.get("kvtier.curve_key_file"))
        # kvtier serve's device tier is its model of vLLM's pool: the same size, or block ids
        # would be refused mid-run (docs/protocol.md, version 3).
        config = {}
        if "device_blocks" in facts:
            config["cache.device_blocks"] = str(facts["device_blocks"][0])
        try:
            hello = self._say_hello(m, extra, config, facts)
        except BaseException:
            if client is None:  # the connector's own socket
                self._client.close()
            self._client = None
            raise
        if hello.version != ENGINE_TIER_VERSION:
            raise RuntimeError(f"kvtier serve chose protocol {hello.version}, not 3")

    def _say_hello(self, m: Dict[str, Any], extra: Dict[str, Any], config: Dict[str, str],
                   facts: Dict[str, Any]) -> Any:
        try:
            return self._client.hello(
                ModelShape(m["name"], int(m["layers"]), int(m["kv_heads"]),
                           int(m["head_dim"]), m.get("kv_dtype", "bf16"),
                           int(m.get("latent_dim", 0) or 0),
                           int(m.get("kv_lora_rank", 0) or 0),
                           int(m.get("rope_head_dim", 0) or 0)),
                self._block_size, name=str(extra.get("kvtier.name", "vllm")),
                versions=(ENGINE_TIER_VERSION,), config=config)
        except KvtierError as e:
            if e.kind in ("model_mismatch", "config_mismatch"):
                hint = ""
                if "cache.device_blocks" in e.message:
                    n, source = facts["device_blocks"]
                    hint = (f" (vLLM's pool: {source} = {n}; start kvtier serve with --set "
                            f"cache.device_blocks={n})")
                raise KvtierConfigError(f"kvtier serve refused vLLM's config: {e.message}{hint}"
                                        ) from e
            raise

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

    # -- scheduler role: the hooks of later releases (defaults where vLLM has none) ---------------

    def on_new_request(self, request: Any) -> None:
        self._request(request)

    def bind_gpu_block_pool(self, gpu_block_pool: Any) -> None:
        # The pool's own eviction is not needed: a reused block id is reported (docs/vllm.md).
        self._gpu_block_pool = gpu_block_pool

    def has_pending_push_work(self) -> bool:
        """Keep vLLM stepping while kvtier still holds a request vLLM has finished (one whose
        storage loads must land before kvtier can release it)."""
        return any(r.finishing for r in self._reqs.values())

    def reset_cache(self) -> Optional[bool]:
        """vLLM asks the connector to drop its cache (new weights, say). kvtier serve's tiers
        are shared by every engine beside it and one engine cannot empty them: refused."""
        log.warning("KvtierConnector.reset_cache: kvtier serve's host and storage tiers are "
                    "shared; restart kvtier serve (or drop its storage) to clear them")
        return False

    def get_kv_connector_stats(self) -> Any:
        stats = self._worker_stats if self.role == KVConnectorRole.WORKER else self._stats
        return None if stats.is_empty() else stats.clone_and_reset()

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[dict] = None) -> Any:
        return KvtierConnectorStats(dict(data or {}))

    # -- scheduler role --------------------------------------------------------------------------

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int
                                   ) -> Tuple[Optional[int], bool]:
        """Tokens kvtier can load past vLLM's own prefix. ``(None, False)`` while kvtier's answer
        has not come (a lookup may ask storage) or, for a hit loaded synchronously, while kvtier
        has not registered the request: vLLM asks again next step. Nothing changes at vLLM; at
        kvtier only the request's registration (``allocate``), which its admission needs."""
        r = self._request(request)
        if r.running and not r.preempted:
            r.preempted = True  # waiting again at vLLM: it was preempted (v0.11.0 says no more)
        hits = self._lookup(r, num_computed_tokens)
        if hits is None:
            return None, False
        bs = self._block_size
        # vLLM computes at least the prompt's last token; kvtier's hits are whole blocks.
        room = max(0, r.prompt_len - 1 - num_computed_tokens)

        def aligned(tokens: int) -> int:
            n = min(tokens, room)
            return max(0, (num_computed_tokens + n) // bs * bs - num_computed_tokens)
        with_storage, host_only = aligned(hits.host_tokens + hits.storage_tokens), \
            aligned(hits.host_tokens)
        if with_storage > host_only and not r.registered:
            # Storage holds part of it: loaded asynchronously once kvtier brought it to host
            # memory (its registration, after vLLM allocated the blocks, starts that).
            r.offer = (num_computed_tokens, with_storage, True)
            return with_storage, True
        # Loaded within the step: kvtier must know the request when vLLM schedules it, so that
        # it is admitted in that very step.
        if not self._ensure_ready(r):
            self._stats.add("lookups_pending")
            return None, False
        if r.prefetched:  # its registration brought storage blocks to host memory: ask again
            r.prefetched = False
            return self.get_num_new_matched_tokens(request, num_computed_tokens)
        r.offer = (num_computed_tokens, host_only, False)
        return host_only, False

    def _lookup(self, r: _Request, computed: int) -> Optional[Any]:
        if r.lookup is None or r.lookup[0] != computed:
            if r.lookup is not None:
                self._client.forget(r.lookup[1])
            call = self._client.send("lookup", computed_tokens=int(computed),
                                     **r.prompt.to_wire())
            r.lookup = (computed, call)
            if self._lookup_wait_ms == 0:  # never wait: the answer is taken next step
                return None
        reply = self._client.poll(r.lookup[1], self._lookup_wait_ms)
        if reply is None:
            return None
        r.lookup = None
        return _hits(reply)

    def _ensure_ready(self, r: _Request) -> bool:
        """Registers the request at kvtier (starting any storage load) and tells whether kvtier
        has answered ready; never waits longer than kvtier.lookup_wait_ms."""
        if r.ready:
            return True
        if r.alloc_call is None:
            fields = {"req": r.req} if r.registered else dict(req=r.req, **r.prompt.to_wire())
            r.alloc_call = self._client.send("allocate", **fields)
            r.registered = True
        reply = self._client.poll(r.alloc_call, self._lookup_wait_ms)
        if reply is None:
            return False
        r.alloc_call = None
        r.ready = reply.get("state") == "ready"
        r.prefetched = r.ready and int(reply.get("prefetched_blocks", 0)) > 0
        return r.ready

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int):
        """vLLM allocated ``blocks`` for the request. A hit loaded synchronously is admitted at
        kvtier with the step being built; an asynchronous one once its storage loads land. For an
        asynchronous load vLLM calls this again once the load is done: nothing to do then."""
        r = self._request(request)
        r.table = group0(blocks)
        if (r.running and not r.preempted) or r.waiting_load:
            return
        local, offered, load_async = r.offer
        self._fresh += r.table[local // self._block_size:]  # past vLLM's own prefix
        load_async = load_async and num_external_tokens > 0
        r.offer = (local, num_external_tokens, load_async)
        self._stats.add("external_tokens", num_external_tokens)
        if load_async:
            # Registered, and its storage loads started, once this step's synchronous hits are
            # admitted (build_connector_meta): the loads take host blocks, and would evict the
            # host copies vLLM was just offered for those hits, which are then load errors.
            r.waiting_load = r.recv_owed = True
        else:
            r.admit_now = True

    def build_connector_meta(self, scheduler_output: Any) -> KvtierConnectorMetadata:
        """One kvtier ``step`` per vLLM step: KV computed by the last one, the finished and
        preempted requests, growths and admissions with vLLM's block ids."""
        meta = KvtierConnectorMetadata()
        work = StepWork()
        scheduled = dict(getattr(scheduler_output, "num_scheduled_tokens", {}) or {})
        for rid in preempted_ids(scheduler_output) or ():
            r = self._reqs.get(rid)
            if r is not None and r.running:
                r.preempted = r.preempted_now = True
        for r in list(self._reqs.values()):
            if (r.waiting_load or r.finishing) and r.registered and not r.ready:
                self._ensure_ready(r)
            self._report(r, work, meta)
        self._add_growth(work, scheduler_output, scheduled)
        admitted = self._add_admissions(work, scheduled)
        self._report_evictions(work)
        if work.to_wire():
            reply = self._client.step(work)
            meta.step = reply.step
            meta.layer_ready_ns = reply.layer_ready_ns
            meta.swap_in = reply.swap_in
            self._settle(reply, admitted, meta)
        for r in list(self._reqs.values()):
            if r.waiting_load and not r.registered and not r.finishing:
                self._ensure_ready(r)  # starts kvtier's storage loads
        self._builds += 1
        return meta

    def _report(self, r: _Request, work: StepWork, meta: KvtierConnectorMetadata) -> None:
        """What became of a request since the last step: KV computed, finished (once kvtier's
        storage loads for it landed), preempted (kvtier saves what its mode says, when the KV is
        still in the blocks)."""
        if r.running and not r.preempted and r.scheduled_until > r.computed:
            work.computed.append((r.req, r.scheduled_until))
            meta.saves[r.rid] = r.table[r.computed // self._block_size:
                                        r.scheduled_until // self._block_size]
            self._stored.update(meta.saves[r.rid])
            r.computed = r.scheduled_until
        if r.finishing:
            if r.recv_owed:  # aborted while vLLM waited for its load: vLLM frees on hearing
                meta.recv_done.add(r.rid)
                r.recv_owed = False
            if r.registered and not r.ready:
                return  # kvtier releases it once its storage loads land
            if r.registered:
                work.finished.append(r.req)
                self._drop_uncached(r, work)
            for call in ((r.lookup or (0, None))[1], r.alloc_call):
                if call is not None:
                    self._client.forget(call)
            del self._reqs[r.rid]
            return
        if r.preempted:
            if r.running:
                # Its KV of the executed steps is still in its blocks only when vLLM says so in
                # the step that preempted it (later releases); v0.11.0 tells nobody, and by the
                # time the connector learns, the blocks may hold another request's KV.
                work.preempted.append((r.req, r.computed if r.preempted_now else 0))
                meta.preempted.add(r.rid)
                self._drop_uncached(r, work)
            r.running = r.preempted = r.preempted_now = False
            r.sent = r.scheduled_until = r.computed = 0

    def _drop_uncached(self, r: _Request, work: StepWork) -> None:
        """Without prefix caching vLLM keeps nothing it frees: a released request's blocks
        are gone from its device."""
        if not self._caching:
            work.evicted += [b for b in r.table[:r.sent] if b in self._stored]
            self._stored.difference_update(r.table[:r.sent])

    def _report_evictions(self, work: StepWork) -> None:
        """vLLM tells a connector of no eviction (its BlockRemoved events go to its own
        publisher); it evicts a cached block only to hand its id out again. So a block id vLLM
        gives a request as a new block that kvtier was told holds KV is reported ``evicted`` in
        the step built next, before the growth or admission that names it (docs/vllm.md)."""
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
        for rid, ids, whole, computed in scheduled_requests(out):
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
            r.scheduled_until = max(r.scheduled_until, tokens)

    def _add_admissions(self, work: StepWork, scheduled: Dict[str, int]) -> Dict[int, _Request]:
        admitted: Dict[int, _Request] = {}
        for r in self._reqs.values():
            local, external, load_async = r.offer
            if r.admit_now:
                # Synchronous: what vLLM computes in this step, its own prefix and the loads
                # included (vLLM set num_computed_tokens to local + external).
                tokens = local + external + scheduled.get(r.rid, 0)
            elif r.waiting_load and r.recv_owed and r.ready and not r.finishing:
                tokens = local + external  # the loaded tokens; vLLM schedules the rest after
            else:
                continue
            r.admit_now = False
            if tokens == 0 or self._blocks(tokens) > len(r.table):
                continue
            work.admits.append((r.req, tokens))
            work.admit_blocks[r.req] = r.table[:self._blocks(tokens)]
            admitted[r.req] = r
            r.scheduled_until = tokens
        return admitted

    def _settle(self, reply: Any, admitted: Dict[int, _Request],
                meta: KvtierConnectorMetadata) -> None:
        bs = self._block_size
        for a in reply.admits:
            r = admitted.get(a.req)
            if r is None:
                continue
            local, external, load_async = r.offer
            want = [r.table[p] for p in range(local // bs, (local + external) // bs)]
            self._stats.add("admissions")
            if not a.admitted:
                # kvtier could not take it: vLLM computes what it would have loaded (an
                # asynchronous load is still reported, with its blocks in error).
                self._stats.add("admissions_refused")
                meta.load_errors |= set(want)
                if load_async:
                    self._finish_async(r, meta)
                continue
            r.running, r.sent = True, self._blocks(r.scheduled_until)
            r.computed = local  # vLLM's own prefix is in its blocks already
            loaded = set(a.load_blocks)
            positions = {b: p for p, b in enumerate(r.table)}
            meta.loads[r.rid] = [(b, positions[b]) for b in want if b in loaded]
            # kvtier holds these names on vLLM's device now, as it does computed blocks: a reuse
            # of one of these ids must be reported (``evicted``), or kvtier would later read
            # another block's bytes under its name.
            self._stored.update(b for b, _ in meta.loads[r.rid])
            failed = [p for p in range(local // bs, (local + external) // bs)
                      if r.table[p] not in loaded]
            if failed:
                # vLLM recomputes from the first block it could not load, in a later step
                # (its failure policy): the KV after it is made by that step's forward, not this
                # one's, so kvtier hears it computed only then and never saves it before.
                r.scheduled_until = min(r.scheduled_until, failed[0] * bs)
            meta.load_errors |= {r.table[p] for p in failed}
            self._stats.add("loaded_blocks", len(meta.loads[r.rid]))
            self._stats.add("load_errors", len(want) - len(meta.loads[r.rid]))
            if load_async:
                self._finish_async(r, meta)
                meta.async_loads.add(r.rid)
                meta.recv_done.discard(r.rid)

    def _finish_async(self, r: _Request, meta: KvtierConnectorMetadata) -> None:
        if r.recv_owed:
            meta.recv_done.add(r.rid)
        r.recv_owed = False

    def update_connector_output(self, connector_output: Any) -> None:
        for rid in getattr(connector_output, "finished_recving", None) or ():
            r = self._reqs.get(rid)
            if r is not None:
                r.waiting_load = False

    def request_finished(self, request: Any, block_ids: List[int]
                         ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        """Finished or aborted (a pending load included): kvtier releases it with the next
        step. vLLM may free the blocks at once: kvtier writes an engine block only during the
        step that admitted it, and reads it for saves when it is reported computed. An aborted
        request whose load vLLM still waits for is reported in ``finished_recving`` with the
        next step, and vLLM frees its blocks then."""
        r = self._reqs.get(request.request_id)
        if r is not None:
            r.finishing = True
        return False, None

    def take_events(self) -> Iterable[Any]:
        # kvtier publishes its block index's events itself (docs/events.md).
        return ()

    def shutdown(self) -> None:
        self._shutdown_worker()
        if self._client is not None:
            try:
                self._client.bye()
            except (KvtierError, TimeoutError) as e:
                log.warning("KvtierConnector.shutdown: bye failed: %s", e)
            finally:
                self._client.close()
                self._client = None


__all__ = ["KvtierConnector", "KvtierConnectorMetadata", "KvtierConfigError", "extra_keys_of",
           "check_model"]
