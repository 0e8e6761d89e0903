"""A stand-in of vLLM's engine around a KV connector, for two generations of vLLM: v0.11.0 and
the newest commits read (docs/vllm.md, "The releases"). Written from vLLM's call order and data
structures, not from its code; vLLM itself cannot be installed here.

Scheduler (``vllm/v1/core/sched/scheduler.py``), each step:

- ``schedule()``: the running requests first; a preemption (here: asked for by a test, as vLLM
  does when a running request's allocation fails) frees the victim's blocks, resets its
  ``num_computed_tokens`` to 0, puts it at the head of the waiting queue, and no waiting request
  is scheduled in that step. Then the waiting requests: one in ``WAITING_FOR_REMOTE_KVS`` is
  skipped until its id came back in ``finished_recving``, and then counts as computed the tokens
  of every block it holds (less one if that is the whole request); for the others, when
  ``num_computed_tokens`` is 0, vLLM's own prefix (full blocks, never the whole request) then
  ``get_num_new_matched_tokens(request, num_local)`` (None: skipped this step); no new tokens
  for an asynchronous load; the blocks for local + external + new tokens; then
  ``update_state_after_alloc(request, all its blocks, num_external)``; an asynchronous load
  parks the request in ``WAITING_FOR_REMOTE_KVS``. The output (``NewRequestData``,
  ``CachedRequestData`` in the generation's shape, ``preempted_req_ids`` and
  ``has_sync_kv_loads`` in the newer one) goes to ``build_connector_meta``; then each scheduled
  request's ``num_computed_tokens`` advances by its scheduled tokens.
- ``update_from_output()``: the worker's load errors truncate a request's computed tokens at
  its first failed block (recompute policy); sampled tokens; finished requests' blocks freed
  after ``request_finished``; ``update_connector_output`` then ``finished_recving`` (an id vLLM
  does not know, or one of a request not waiting for its load nor finished, is vLLM's assertion
  error); ``take_events``. ``finish_requests`` (abort) calls ``request_finished``; the blocks of
  a request still waiting for its load are freed only once its id comes in
  ``finished_recving``.
- Newer generation only: ``bind_gpu_block_pool`` at start, ``on_new_request`` on arrival,
  ``get_kv_connector_stats`` when the workers sent stats, ``has_pending_push_work`` keeps the
  loop stepping, ``reset_cache`` on ``reset_prefix_cache(reset_connector=True)``.

Model runner (``kv_connector_model_runner_mixin.py``), each step: ``bind_connector_metadata``
(metadata pickled across the process boundary); newer: ``handle_preemptions(metadata)``;
``start_load_kv`` before the forward (v0.11.0; newer: only when the step has synchronous loads,
else after the forward); per layer ``wait_for_layer_load``, the layer's compute (which writes
each computed token's KV: a pattern of the block's content and the layer), ``save_kv_layer``;
``wait_for_save``; ``get_finished`` (newer: through ``get_transfer_results`` when the class has
it); ``get_block_ids_with_load_errors``; ``get_kv_connector_stats``; newer:
``get_kv_connector_kv_cache_events``, ``build_connector_worker_meta``;
``clear_connector_metadata``. The KVConnectorOutput is pickled back.

``Checker`` holds the connector to the contract at every step; each check raises
AssertionError.
"""

from __future__ import annotations

import pickle
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

WAITING, REMOTE, RUNNING, PREEMPTED = "waiting", "waiting_for_remote_kvs", "running", "preempted"
FINISHED_STOPPED, FINISHED_ABORTED = "finished_stopped", "finished_aborted"


@dataclass(frozen=True)
class Generation:
    name: str
    resumed_set: bool          # CachedRequestData.resumed_req_ids (else resumed_from_preemption)
    preempted_ids: bool        # SchedulerOutput.preempted_req_ids
    new_hooks: bool            # on_new_request, bind_gpu_block_pool, handle_preemptions, ...
    loads_after_forward: bool  # start_load_kv after the forward when no load is synchronous


V0_11_0 = Generation("v0.11.0", False, False, False, False)
CURRENT = Generation("main", True, True, True, True)
GENERATIONS = (V0_11_0, CURRENT)


@dataclass
class Request:
    request_id: str
    prompt_token_ids: List[int]
    max_tokens: int = 1
    lora_request: Any = None
    mm_features: List[Any] = field(default_factory=list)
    cache_salt: Optional[str] = None
    num_computed_tokens: int = 0
    status: str = WAITING
    output_token_ids: List[int] = field(default_factory=list)
    num_preemptions: int = 0
    num_external_computed_tokens: int = 0
    num_cached_tokens: int = -1

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def all_token_ids(self) -> List[int]:
        return self.prompt_token_ids + self.output_token_ids

    def is_finished(self) -> bool:
        return self.status.startswith("finished")


class KVCacheBlocks:
    def __init__(self, ids: List[int]):
        self._ids = list(ids)

    def get_block_ids(self, allow_none: bool = False):
        if allow_none and not self._ids:
            return None
        return (list(self._ids),)


class KVCacheManager:
    """vLLM's KV cache manager, one group: a block pool whose free queue hands out the least
    recently freed block first, evicting it from the prefix cache (lazily) when it was cached;
    full blocks are cached by their content (and LoRA) when allocated, or, for an asynchronous
    load, once it has landed."""

    def __init__(self, num_blocks: int, block_size: int, caching: bool = True):
        self.bs = block_size
        self.caching = caching
        self.free_queue = deque(range(num_blocks))
        self.refs = [0] * num_blocks
        self.key_of: Dict[int, tuple] = {}
        self.cached: Dict[tuple, int] = {}
        self.blocks: Dict[str, List[int]] = {}
        self.delayed: Set[str] = set()

    def key(self, r: Request, i: int) -> tuple:
        lora = getattr(r.lora_request, "lora_int_id", None)
        return (lora, r.cache_salt, tuple(r.all_token_ids[:(i + 1) * self.bs]))

    def get_computed_blocks(self, r: Request) -> Tuple[List[int], int]:
        hits: List[int] = []
        if not self.caching:
            return hits, 0
        while (len(hits) + 1) * self.bs <= r.num_tokens - 1:  # never the whole request
            b = self.cached.get(self.key(r, len(hits)))
            if b is None:
                break
            hits.append(b)
        return hits, len(hits) * self.bs

    def _take(self) -> int:
        b = self.free_queue.popleft()
        if b in self.key_of:  # evicted to be handed out again
            del self.cached[self.key_of.pop(b)]
        self.refs[b] = 1
        return b

    def num_free(self) -> int:
        return len(self.free_queue)

    def allocate_slots(self, r: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: Optional[List[int]] = None,
                       num_external_computed_tokens: int = 0,
                       delay_cache_blocks: bool = False) -> Optional[KVCacheBlocks]:
        computed = new_computed_blocks or []
        held = self.blocks.get(r.request_id, [])
        total = r.num_computed_tokens + num_new_computed_tokens + num_external_computed_tokens \
            + num_new_tokens
        need = -(-total // self.bs) - len(held) - len(computed)
        reusable = sum(1 for b in computed if self.refs[b] == 0)
        if need > self.num_free() - reusable:
            return None
        for b in computed:
            if self.refs[b] == 0:
                self.free_queue.remove(b)
            self.refs[b] += 1
        new = [self._take() for _ in range(max(0, need))]
        self.blocks[r.request_id] = held + computed + new
        if delay_cache_blocks:
            self.delayed.add(r.request_id)
        else:
            self.cache_blocks(r, min(total, r.num_tokens))
        return KVCacheBlocks(new)

    def cache_blocks(self, r: Request, num_tokens: int) -> None:
        if not self.caching:
            return
        for i, b in enumerate(self.blocks.get(r.request_id, [])[:num_tokens // self.bs]):
            k = self.key(r, i)
            if k not in self.cached and b not in self.key_of:
                self.cached[k], self.key_of[b] = b, k

    def get_blocks(self, rid: str) -> KVCacheBlocks:
        return KVCacheBlocks(self.blocks.get(rid, []))

    def get_block_ids(self, rid: str) -> tuple:
        return (list(self.blocks.get(rid, [])),)

    def free(self, r: Request) -> None:
        # Freed in reverse order, so that a request's tail is evicted first.
        for b in reversed(self.blocks.pop(r.request_id, [])):
            self.refs[b] -= 1
            if self.refs[b] == 0:
                if not self.caching and b in self.key_of:
                    del self.cached[self.key_of.pop(b)]
                self.free_queue.append(b)
        self.delayed.discard(r.request_id)


def pattern(key: tuple, layer: int) -> float:
    """The KV a block of this content holds in this layer (the tests' stand-in of real KV)."""
    return float(hash((key, layer)) % 1000003) + 0.5


class Engine:
    """One vLLM engine: scheduler, KV cache manager, model runner, connectors of both roles."""

    def __init__(self, gen: Generation, scheduler_conn: Any, worker_conn: Any, num_blocks: int,
                 block_size: int, layers: int = 2, checker: Optional["Checker"] = None,
                 caches: Optional[Dict[str, Any]] = None):
        self.gen = gen
        self.sched, self.worker = scheduler_conn, worker_conn
        self.bs = block_size
        self.kv = KVCacheManager(num_blocks, block_size)
        self.requests: Dict[str, Request] = {}
        self.waiting: deque = deque()
        self.running: List[Request] = []
        self.finished_req_ids: Set[str] = set()
        self.finished_recving_kv_req_ids: Set[str] = set()
        self.prev_scheduled: Set[str] = set()
        self.to_preempt: Set[str] = set()
        self.sync_admitted: List[Tuple[str, int, int]] = []  # this step: rid, local, external
        self.layer_names = [f"model.layers.{i}.self_attn" for i in range(layers)]
        # FlashAttention's layout, [2, num_blocks, block_size, kv_heads, head_dim], small; or
        # the caller's (in shared memory, for a data path that moves bytes).
        self.caches = caches if caches is not None else {
            n: np.zeros((2, num_blocks, block_size, 1, 2), dtype=np.float32)
            for n in self.layer_names}
        self.layer_names = list(self.caches)
        self.block_keys: Dict[int, tuple] = {}   # what each block's KV is of, once computed
        self.matched: Dict[str, Optional[int]] = {}  # get_num_new_matched_tokens' last answers
        self.load_errors: Set[int] = set()
        self.recving_seen: List[str] = []
        self.stats: List[Any] = []
        self.checker = checker
        self.steps = 0
        self.worker.register_kv_caches(self.caches)
        if gen.new_hooks:
            self.sched.bind_gpu_block_pool(SimpleNamespace(num_gpu_blocks=num_blocks))

    # -- the engine core ---------------------------------------------------------------------

    def add(self, r: Request) -> Request:
        self.requests[r.request_id] = r
        self.waiting.append(r)
        if self.gen.new_hooks:
            self.sched.on_new_request(r)
        return r

    def preempt(self, rid: str) -> None:
        """Preempted at the next schedule, as when its allocation fails."""
        self.to_preempt.add(rid)

    def has_work(self) -> bool:
        pending = self.gen.new_hooks and self.sched.has_pending_push_work()
        return bool(self.requests) or bool(self.finished_req_ids) or pending

    def step(self) -> Any:
        out = self.schedule()
        output = self.execute(out)
        self.update_from_output(out, output)
        self.steps += 1
        return out

    # -- schedule ----------------------------------------------------------------------------

    def _preempt(self, r: Request) -> None:
        self.running.remove(r)
        self.kv.free(r)
        r.status, r.num_computed_tokens = PREEMPTED, 0
        r.num_preemptions += 1
        self.waiting.appendleft(r)

    def schedule(self) -> Any:
        new_reqs, resumed, running, preempted = [], [], [], []
        self.sync_admitted = []
        scheduled: Dict[str, int] = {}
        new_blocks: Dict[str, KVCacheBlocks] = {}
        sync_loads = False
        for r in list(self.running):
            if r.request_id in self.to_preempt:
                self.to_preempt.discard(r.request_id)
                self._preempt(r)
                preempted.append(r)
                continue
            n = r.num_tokens - r.num_computed_tokens
            blocks = self.kv.allocate_slots(r, n)
            assert blocks is not None, "the stand-in's pool is sized so that running fits"
            running.append(r)
            new_blocks[r.request_id] = blocks
            scheduled[r.request_id] = n
        if not preempted:
            sync_loads = self._schedule_waiting(new_reqs, resumed, scheduled)
        out = self._output(new_reqs, resumed, running, preempted, scheduled, new_blocks,
                           sync_loads)
        if self.checker:
            self.checker.before_build(self, out)
        out.kv_connector_metadata = self.sched.build_connector_meta(out)
        if self.checker:
            self.checker.after_build(self, out)
        for rid, n in scheduled.items():
            self.requests[rid].num_computed_tokens += n
        self.prev_scheduled = set(scheduled)
        self.finished_req_ids = set()
        return out

    def _schedule_waiting(self, new_reqs, resumed, scheduled) -> bool:
        sync_loads = False
        skipped: List[Request] = []
        while self.waiting:
            r = self.waiting.popleft()
            if r.status == REMOTE:
                if r.request_id not in self.finished_recving_kv_req_ids:
                    skipped.append(r)
                    continue
                self._remote_ready(r)
            local_blocks, local, ext, load_async = [], 0, 0, False
            if r.num_computed_tokens == 0:
                local_blocks, local = self.kv.get_computed_blocks(r)
                ext, load_async = self.sched.get_num_new_matched_tokens(r, local)
                self.matched[r.request_id] = ext
                if ext is None:
                    skipped.append(r)
                    continue
                r.num_external_computed_tokens = ext
                computed = local + ext
            else:
                computed = r.num_computed_tokens
            n = 0 if load_async else r.num_tokens - computed
            blocks = self.kv.allocate_slots(r, n, local, local_blocks, ext, load_async)
            if blocks is None:
                self.waiting.appendleft(r)
                break
            self.sched.update_state_after_alloc(r, self.kv.get_blocks(r.request_id), ext)
            if load_async:
                r.status = REMOTE
                skipped.append(r)
                continue
            sync_loads |= ext > 0
            if ext:
                self.sync_admitted.append((r.request_id, local, ext))
            self.running.append(r)
            (resumed if r.status == PREEMPTED else new_reqs).append(r)
            scheduled[r.request_id] = n
            r.status, r.num_computed_tokens = RUNNING, computed
            if r.num_cached_tokens < 0:
                r.num_cached_tokens = computed
        self.waiting.extendleft(reversed(skipped))
        return sync_loads

    def _remote_ready(self, r: Request) -> None:
        self.finished_recving_kv_req_ids.discard(r.request_id)
        (ids,) = self.kv.get_block_ids(r.request_id)
        n = min(len(ids) * self.bs, r.num_tokens, getattr(r, "valid_upto", 1 << 30))
        if n == r.num_tokens:
            n -= 1
        self.kv.delayed.discard(r.request_id)
        self.kv.cache_blocks(r, n)
        r.num_computed_tokens = n
        r.status = PREEMPTED if (self.gen.new_hooks and r.num_preemptions) else WAITING

    def _output(self, new_reqs, resumed, running, preempted, scheduled, new_blocks,
                sync_loads) -> Any:
        new_data = [SimpleNamespace(req_id=r.request_id, prompt_token_ids=r.prompt_token_ids,
                                    mm_features=r.mm_features, lora_request=r.lora_request,
                                    block_ids=self.kv.get_block_ids(r.request_id),
                                    num_computed_tokens=r.num_computed_tokens,
                                    sampling_params=None, pooling_params=None)
                    for r in new_reqs]
        ids = [r.request_id for r in running + resumed]
        block_ids = [new_blocks[r.request_id].get_block_ids(allow_none=True) for r in running]
        block_ids += [self.kv.get_block_ids(r.request_id) for r in resumed]
        computed = [r.num_computed_tokens for r in running + resumed]
        if self.gen.resumed_set:
            cached = SimpleNamespace(
                req_ids=ids, resumed_req_ids={r.request_id for r in resumed},
                new_token_ids=[], new_block_ids=block_ids, num_computed_tokens=computed,
                num_output_tokens=[len(r.output_token_ids) for r in running + resumed],
                all_token_ids={r.request_id: r.all_token_ids for r in running + resumed
                               if r.request_id not in self.prev_scheduled})
        else:
            cached = SimpleNamespace(
                req_ids=ids, resumed_from_preemption=[False] * len(running)
                + [True] * len(resumed), new_token_ids=[], new_block_ids=block_ids,
                num_computed_tokens=computed)
        out = SimpleNamespace(scheduled_new_reqs=new_data, scheduled_cached_reqs=cached,
                              num_scheduled_tokens=scheduled,
                              total_num_scheduled_tokens=sum(scheduled.values()),
                              scheduled_spec_decode_tokens={}, scheduled_encoder_inputs={},
                              num_common_prefix_blocks=[0],
                              finished_req_ids=set(self.finished_req_ids),
                              free_encoder_mm_hashes=[])
        if self.gen.preempted_ids:
            out.preempted_req_ids = {r.request_id for r in preempted}
            out.has_sync_kv_loads = sync_loads
        return out

    # -- the model runner --------------------------------------------------------------------

    def execute(self, out: Any) -> Any:
        w = self.worker
        meta = pickle.loads(pickle.dumps(out.kv_connector_metadata))
        w.bind_connector_metadata(meta)
        if self.gen.new_hooks:
            w.handle_preemptions(meta)
        early = not self.gen.loads_after_forward or getattr(out, "has_sync_kv_loads", True)
        if early:
            w.start_load_kv(SimpleNamespace(no_compile_layers={}))
        for i, name in enumerate(self.layer_names):
            w.wait_for_layer_load(name)
            self._compute_layer(out, i, name)
            w.save_kv_layer(name, self.caches[name], None)
        if not early:
            w.start_load_kv(SimpleNamespace(no_compile_layers={}))
        w.wait_for_save()
        if self.gen.new_hooks and hasattr(w, "get_transfer_results"):
            results = w.get_transfer_results(out.finished_req_ids)
            sending, recving = results.finished_sending, results.finished_recving
        else:
            sending, recving = w.get_finished(out.finished_req_ids)
        output = SimpleNamespace(finished_sending=sending, finished_recving=recving,
                                 invalid_block_ids=w.get_block_ids_with_load_errors(),
                                 kv_connector_stats=w.get_kv_connector_stats())
        if self.gen.new_hooks:
            output.kv_cache_events = w.get_kv_connector_kv_cache_events()
            output.kv_connector_worker_meta = w.build_connector_worker_meta()
        w.clear_connector_metadata()
        if self.checker:
            self.checker.after_execute(self, out, output)
        return pickle.loads(pickle.dumps(output))

    def _compute_layer(self, out: Any, layer: int, name: str) -> None:
        for rid, n in out.num_scheduled_tokens.items():
            r = self.requests[rid]
            (ids,) = self.kv.get_block_ids(rid)
            for pos in range(r.num_computed_tokens - n, r.num_computed_tokens):
                i = pos // self.bs
                key = self.kv.key(r, i)
                self.caches[name][:, ids[i], pos % self.bs] = pattern(key, layer)
                self.block_keys[ids[i]] = key

    # -- update_from_output ------------------------------------------------------------------

    def update_from_output(self, out: Any, output: Any) -> None:
        stats = output.kv_connector_stats
        if stats and self.gen.new_hooks:
            mine = self.sched.get_kv_connector_stats()
            if mine:
                stats = stats.aggregate(mine)
        if stats:
            self.stats.append(stats)
        if output.invalid_block_ids:
            self.load_errors |= set(output.invalid_block_ids)
            self._invalid_blocks(set(output.invalid_block_ids))
        for rid in out.num_scheduled_tokens:
            r = self.requests.get(rid)
            if r is None or r.is_finished() or r.status != RUNNING:
                continue
            if r.num_computed_tokens >= r.num_tokens:
                r.output_token_ids.append(900000 + len(r.output_token_ids))
                if len(r.output_token_ids) >= r.max_tokens:
                    r.status = FINISHED_STOPPED
                    self.running.remove(r)
                    self._free_request(r)
        self.sched.update_connector_output(output)
        for rid in output.finished_recving or ():
            self.recving_seen.append(rid)
            assert rid in self.requests, f"vLLM: finished_recving for {rid}, unknown to vLLM"
            r = self.requests[rid]
            if r.status == REMOTE:
                self.finished_recving_kv_req_ids.add(rid)
            else:
                assert r.is_finished(), f"vLLM: finished_recving for {rid}, {r.status}"
                self._free_blocks(r)
        assert not list(self.sched.take_events())

    def _invalid_blocks(self, invalid: Set[int]) -> None:
        # An asynchronous load's failed blocks: counted computed only up to the first of them.
        for r in self.waiting:
            if r.status == REMOTE:
                (ids,) = self.kv.get_block_ids(r.request_id)
                bad = [i for i, b in enumerate(ids) if b in invalid]
                if bad:
                    r.valid_upto = min(getattr(r, "valid_upto", 1 << 30), bad[0] * self.bs)
        for r in self.running:
            (ids,) = self.kv.get_block_ids(r.request_id)
            upto = -(-max(r.num_cached_tokens, 0) // self.bs)
            for i, b in enumerate(ids[:upto]):
                if b in invalid:
                    r.num_computed_tokens = min(r.num_computed_tokens, i * self.bs)
                    break

    def finish(self, rid: str) -> None:
        """An abort (finish_requests)."""
        r = self.requests[rid]
        delay = False
        if r.status == RUNNING:
            self.running.remove(r)
        else:
            self.waiting.remove(r)
        if r.status == REMOTE:
            delay = rid not in self.finished_recving_kv_req_ids
            self.finished_recving_kv_req_ids.discard(rid)
        r.status = FINISHED_ABORTED
        self._free_request(r, delay)

    def _free_request(self, r: Request, delay: bool = False) -> None:
        (ids,) = self.kv.get_block_ids(r.request_id)
        connector_delay, params = self.sched.request_finished(r, ids)
        assert isinstance(connector_delay, bool)
        self.finished_req_ids.add(r.request_id)
        if not (delay or connector_delay):
            self._free_blocks(r)

    def _free_blocks(self, r: Request) -> None:
        self.kv.free(r)
        del self.requests[r.request_id]


class Checker:
    """The connector's contract, checked at every step of an engine (docs/vllm.md):

    1. kvtier admits what vLLM computes: after each build, for every request vLLM's step
       computes, the tokens kvtier granted (admission plus growths) are the tokens the step
       computes to, in the step vLLM schedules it; an admission's table is vLLM's.
    2. Every block offered for a synchronous load is loaded, or reported in load errors, in the
       step that scheduled it; an asynchronous load's by the step that reports its
       finished_recving (which vLLM's stand-in checks comes once, for a request waiting for it).
    3. ``computed`` never runs ahead of the KV vLLM's steps made, nor do the blocks the worker
       is told to save.
    4. A loaded block holds what kvtier names: with a data path that moves bytes, the KV saved
       for that content; with the modelled one, the marker of its position.
    """

    def __init__(self, spy: "Spy"):
        self.spy = spy
        self.told: Dict[int, int] = {}    # kvtier request -> tokens kvtier granted it
        self.executed: Dict[str, int] = {}
        self.made: Dict[str, List[int]] = {}  # blocks whose KV a request's steps made
        self.loaded: Dict[str, Set[int]] = {}
        self.errors: Set[int] = set()
        self.checked_loads = 0
        self.rid_of: Dict[int, str] = {}  # kvtier request -> vLLM request id

    def before_build(self, e: "Engine", out: Any) -> None:
        self.spy.calls.clear()

    def _rid(self, e: "Engine", req: int) -> Optional[str]:
        for rid, r in e.sched._reqs.items():
            self.rid_of[r.req] = rid
        return self.rid_of.get(req)

    def after_build(self, e: "Engine", out: Any) -> None:
        for work, reply in self.spy.calls:
            granted = {a.req for a in reply.admits if a.admitted}
            for req, _ in work.preempted:
                self.told.pop(req, None)
            for req in work.finished:
                self.told.pop(req, None)
            for req, tokens in work.computed:
                rid = self._rid(e, req)
                assert rid is not None and tokens <= self.executed.get(rid, 0), \
                    f"computed {tokens} tokens of {rid}: its steps made " \
                    f"{self.executed.get(rid, 0)}"
            for req, tokens in work.admits:
                rid = self._rid(e, req)
                (ids,) = e.kv.get_block_ids(rid)
                assert work.admit_blocks[req] == ids[:-(-tokens // e.bs)], \
                    f"{rid}: admitted with table {work.admit_blocks[req]}, vLLM's is {ids}"
                if req in granted:
                    self.told[req] = tokens
            for req, tokens in work.grows:
                self.told[req] = max(self.told.get(req, 0), tokens)
        meta = out.kv_connector_metadata
        for rid, blocks in meta.saves.items():
            made = self.made.get(rid, [])
            assert all(b in made for b in blocks), \
                f"{rid}: told to save {blocks} before its steps made them (made {made})"
        for rid, n in out.num_scheduled_tokens.items():
            r = e.requests[rid]
            x = e.sched._reqs.get(rid)
            want = r.num_computed_tokens + n
            got = self.told.get(x.req, 0) if x is not None else 0
            assert got == want, (f"{rid}: vLLM computes {want} tokens in step {e.steps}, kvtier "
                                 f"granted {got}")

    def after_execute(self, e: "Engine", out: Any, output: Any) -> None:
        meta = out.kv_connector_metadata
        self.errors |= set(output.invalid_block_ids or ())
        for rid, blocks in meta.loads.items():
            self.loaded.setdefault(rid, set()).update(b for b, _ in blocks)
            for b, position in blocks:
                self.check_block(e, rid, b, position)
            if blocks:  # the KV of the loaded blocks and of vLLM's own prefix before them
                top = (max(p for _, p in blocks) + 1) * e.bs
                self.executed[rid] = max(self.executed.get(rid, 0), top)
        for rid in out.num_scheduled_tokens:
            self.executed[rid] = max(self.executed.get(rid, 0),
                                     e.requests[rid].num_computed_tokens)
        for rid in set(out.num_scheduled_tokens) | set(meta.loads):
            (ids,) = e.kv.get_block_ids(rid)
            self.made[rid] = ids[:self.executed.get(rid, 0) // e.bs]
        for rid, local, ext in e.sync_admitted:
            (ids,) = e.kv.get_block_ids(rid)
            self._all_loaded(rid, ids[local // e.bs:(local + ext) // e.bs])
        for rid in output.finished_recving or ():
            r = e.requests.get(rid)
            if r is not None and r.status == REMOTE:  # its external blocks: its table's tail
                (ids,) = e.kv.get_block_ids(rid)
                self._all_loaded(rid, ids[len(ids) - r.num_external_computed_tokens // e.bs:])

    def _all_loaded(self, rid: str, blocks: List[int]) -> None:
        missing = [b for b in blocks if b not in self.loaded.get(rid, set()) | self.errors]
        assert not missing, f"{rid}: blocks {missing} neither loaded nor in load errors"
        self.checked_loads += len(blocks)

    def check_block(self, e: "Engine", rid: str, block: int, position: int) -> None:
        r = e.requests[rid]
        data = e.worker.data_path
        for i, name in enumerate(e.layer_names):
            got = e.caches[name][:, block]
            want = pattern(e.kv.key(r, position), i) if data.moves_bytes else position + 1
            assert np.all(got == want), \
                f"{rid}: block {block} (position {position}) holds {got.flat[0]}, not {want}"


class Spy:
    """Records the scheduler role's steps at kvtier serve: (StepWork, StepReply)."""

    def __init__(self, client: Any):
        self.calls: List[Tuple[Any, Any]] = []
        self.all: List[Tuple[Any, Any]] = []
        step = client.step

        def spied(work):
            reply = step(work)
            self.calls.append((work, reply))
            self.all.append((work, reply))
            return reply
        client.step = spied
