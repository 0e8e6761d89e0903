"""A stand-in of vLLM v0.11.0's scheduler loop, calling a KV connector in the order that
release's ``vllm/v1/core/sched/scheduler.py`` and its GPU model runner's connector mixin do:

- ``schedule()``: running requests first (their new blocks; a preemption frees a victim's
  blocks, resets its ``num_computed_tokens`` and puts it back at the head of the waiting
  queue); then waiting requests: one in ``WAITING_FOR_REMOTE_KVS`` is skipped until its id came
  back in ``finished_recving``; for each other ``get_num_new_matched_tokens(request,
  num_local_computed_tokens)`` (``None``: skipped this step), the block allocation for local +
  external + new tokens (no new tokens when the load is asynchronous), then
  ``update_state_after_alloc(request, blocks, num_external_tokens)``; an asynchronous load
  parks the request in ``WAITING_FOR_REMOTE_KVS``; finally ``build_connector_meta(output)``.
- the worker: ``bind_connector_metadata``, ``start_load_kv``, per layer ``wait_for_layer_load``
  and ``save_kv_layer``, ``wait_for_save``, ``get_finished(finished_req_ids)``,
  ``clear_connector_metadata``.
- ``update_from_output()``: ``update_connector_output(KVConnectorOutput)``, then per finished
  request ``request_finished(request, block_ids)`` before its blocks are freed, then
  ``take_events()``. ``finish_requests`` (an abort) calls ``request_finished`` the same way.

Its device allocator stands for vLLM's KV cache manager: full prompt blocks are cached by
prefix (and LoRA adapter) and found again as local hits; released blocks stay cached until
their ids are needed, least recently released first.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Set

import numpy as np

WAITING, WAITING_FOR_REMOTE_KVS, RUNNING, PREEMPTED = "waiting", "remote", "running", "preempted"


@dataclass
class Request:
    request_id: str
    prompt_token_ids: List[int]
    lora_request: Any = None
    mm_features: List[Any] = field(default_factory=list)
    num_computed_tokens: int = 0
    status: str = WAITING
    blocks: List[int] = field(default_factory=list)
    external: int = 0


class Blocks:
    def __init__(self, ids):
        self._ids = list(ids)

    def get_block_ids(self):
        return (list(self._ids),)


def vllm_config(extra, block_size):
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(kv_connector="KvtierConnector",
                                           kv_connector_module_path="kvtier_client.vllm_connector",
                                           kv_role="kv_both", kv_connector_extra_config=extra),
        cache_config=SimpleNamespace(block_size=block_size))


class MiniScheduler:
    def __init__(self, scheduler_conn, worker_conn, num_blocks, block_size, layers=2):
        self.sched, self.worker = scheduler_conn, worker_conn
        self.bs = block_size
        self.free = list(range(num_blocks))[::-1]
        self.cached: Dict[tuple, int] = {}       # prefix key -> block
        self.key_of: Dict[int, tuple] = {}
        self.refs: Dict[int, int] = {}
        self.lru: List[int] = []                 # cached blocks nobody holds
        self.waiting: List[Request] = []
        self.running: List[Request] = []
        self.recved: Set[str] = set()
        self.caches = {f"layer.{i}": np.zeros((num_blocks, block_size), dtype=np.float32)
                       for i in range(layers)}
        self.worker.register_kv_caches(self.caches)
        self.matched: Dict[str, Optional[int]] = {}  # last get_num_new_matched_tokens answer
        self.load_errors: Set[int] = set()
        self.events: List[Any] = []

    def add(self, request: Request) -> None:
        self.waiting.append(request)

    def _key(self, r, i):
        lora = getattr(r.lora_request, "lora_int_id", None)
        return (lora, tuple(r.prompt_token_ids[:(i + 1) * self.bs]))

    def _local_hits(self, r):
        """vLLM's get_computed_blocks: its own cached prefix (never the whole prompt)."""
        hits = []
        while (len(hits) + 1) * self.bs < len(r.prompt_token_ids):
            b = self.cached.get(self._key(r, len(hits)))
            if b is None:
                break
            hits.append(b)
        return hits

    def _take(self, n):
        if n > len(self.free) + len(self.lru):
            return None
        out = []
        for _ in range(n):
            if self.free:
                out.append(self.free.pop())
                continue
            b = self.lru.pop(0)
            del self.cached[self.key_of.pop(b)]
            out.append(b)
        for b in out:
            self.refs[b] = 1
        return out

    def _hold(self, blocks):
        for b in blocks:
            if self.refs.get(b, 0) == 0 and b in self.lru:
                self.lru.remove(b)
            self.refs[b] = self.refs.get(b, 0) + 1

    def _release(self, r):
        for i, b in enumerate(r.blocks):
            self.refs[b] -= 1
            key = self._key(r, i)
            if (i + 1) * self.bs <= len(r.prompt_token_ids) and key not in self.cached \
                    and b not in self.key_of:
                self.cached[key], self.key_of[b] = b, key
            if self.refs[b] == 0:
                (self.lru if b in self.key_of else self.free).append(b)
        r.blocks = []

    def _blocks_for(self, tokens):
        return -(-tokens // self.bs)

    def preempt(self, request: Request) -> None:
        self.running.remove(request)
        self._release(request)
        request.num_computed_tokens, request.status = 0, PREEMPTED
        self.waiting.insert(0, request)

    def step(self, finish=(), decode_tokens=1):
        out = self._schedule(decode_tokens)
        fin = self._execute(out)
        self._update_from_output(out, fin, finish)
        return out

    def _schedule(self, decode_tokens):
        new_reqs, cached, scheduled = [], SimpleNamespace(
            req_ids=[], resumed_from_preemption=[], new_block_ids=[], num_computed_tokens=[]), {}
        for r in self.running:
            want = self._blocks_for(r.num_computed_tokens + decode_tokens) - len(r.blocks)
            new = self._take(max(0, want)) or []
            r.blocks += new
            cached.req_ids.append(r.request_id)
            cached.resumed_from_preemption.append(False)
            cached.new_block_ids.append((new,) if new else None)
            cached.num_computed_tokens.append(r.num_computed_tokens)
            scheduled[r.request_id] = decode_tokens
        for r in list(self.waiting):
            if r.status == WAITING_FOR_REMOTE_KVS:
                if r.request_id not in self.recved:
                    continue
                self.recved.discard(r.request_id)
                r.num_computed_tokens, r.status = r.external, WAITING
            resumed = r.status == PREEMPTED
            hits, n, load_async = [], 0, False
            local = r.num_computed_tokens  # > 0: its asynchronous load landed
            if local == 0:
                hits = self._local_hits(r)
                local = len(hits) * self.bs
                n, load_async = self.sched.get_num_new_matched_tokens(r, local)
                self.matched[r.request_id] = n
                if n is None:
                    continue
            new_tokens = 0 if load_async else len(r.prompt_token_ids) - local - n
            ids = self._take(self._blocks_for(local + n + new_tokens) - len(r.blocks) - len(hits))
            if ids is None:
                break
            self._hold(hits)
            r.blocks += hits + ids
            self.sched.update_state_after_alloc(r, Blocks(r.blocks), n)
            self.waiting.remove(r)
            if load_async:
                r.status, r.external = WAITING_FOR_REMOTE_KVS, local + n
                self.waiting.append(r)
                continue
            r.num_computed_tokens = local + n
            r.status = RUNNING
            self.running.append(r)
            scheduled[r.request_id] = new_tokens
            if resumed:
                cached.req_ids.append(r.request_id)
                cached.resumed_from_preemption.append(True)
                cached.new_block_ids.append((list(r.blocks),))
                cached.num_computed_tokens.append(r.num_computed_tokens)
            else:
                new_reqs.append(SimpleNamespace(req_id=r.request_id, block_ids=(list(r.blocks),),
                                                num_computed_tokens=r.num_computed_tokens))
        out = SimpleNamespace(scheduled_new_reqs=new_reqs, scheduled_cached_reqs=cached,
                              num_scheduled_tokens=scheduled, finished_req_ids=set())
        out.kv_connector_metadata = self.sched.build_connector_meta(out)
        return out

    def _execute(self, out):
        w = self.worker
        w.bind_connector_metadata(out.kv_connector_metadata)
        w.start_load_kv(None)
        for name, cache in self.caches.items():
            w.wait_for_layer_load(name)
            w.save_kv_layer(name, cache, None)
        w.wait_for_save()
        fin = w.get_finished(out.finished_req_ids)
        self.load_errors |= w.get_block_ids_with_load_errors()
        w.clear_connector_metadata()
        for r in self.running:
            r.num_computed_tokens += out.num_scheduled_tokens.get(r.request_id, 0)
        return fin

    def _update_from_output(self, out, fin, finish):
        sending, recving = fin
        self.sched.update_connector_output(SimpleNamespace(finished_sending=sending,
                                                           finished_recving=recving))
        self.recved |= set(recving or ())
        for rid in finish:
            self.finish(rid)
        self.events += list(self.sched.take_events())

    def finish(self, rid):
        """A request done or aborted (finish_requests): request_finished, then its blocks."""
        r = next(x for x in self.running + self.waiting if x.request_id == rid)
        delay, params = self.sched.request_finished(r, list(r.blocks))
        assert isinstance(delay, bool)
        (self.running if r in self.running else self.waiting).remove(r)
        if not delay:
            self._release(r)
        return delay, params
