"""The scheduler side of vLLM's KV connector (KVConnectorBase_V1), forwarding to kvtier serve.

The method names and arguments are vLLM's, so an engine (or a test) calls it as vLLM's scheduler
calls a connector; nothing of vLLM is imported. Objects are read by duck typing:

- a request has ``request_id`` (str) and ``prompt_token_ids`` (list of int), and optionally
  ``num_tokens`` (prompt plus generated tokens so far);
- ``blocks`` (``update_state_after_alloc``) may offer ``get_block_ids()``;
- a scheduler output has ``num_scheduled_tokens`` (request id -> tokens this step) and
  ``finished_req_ids`` (a set of request ids).

What each method does:

- ``get_num_new_matched_tokens(request, num_computed_tokens)`` registers the request with
  ``allocate`` (its prompt's blocks are hashed by the server from the token ids); while storage
  loads are pending it returns ``(None, False)``, which tells vLLM to ask again next step; then
  the tokens kvtier holds past the engine's own ``num_computed_tokens`` (host and storage hits,
  never the whole prompt: one token is always computed), with ``False`` (loads are waited for
  in the step, not asynchronously).
- ``update_state_after_alloc(request, blocks, num_external_tokens)`` notes that the request is
  admitted in the step being built, its scheduled tokens counting from the engine's
  ``num_computed_tokens`` plus the external ones.
- ``build_connector_meta(scheduler_output)`` sends the step's block work in one ``step`` call:
  what became computed since the last step, the admissions, the growth of running requests,
  the finished ones; it returns ``KvtierConnectorMetadata`` for the worker side: per admitted
  request the hits per tier and when each layer's loads landed.
- ``request_finished(request, block_ids)`` releases the request (``finish``) and returns
  ``(False, None)``: its blocks are free at once, the write policy's copies follow on the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .client import Client, Hits, Prompt, StepWork


@dataclass
class KvtierConnectorMetadata:
    """What the worker side needs from one step."""
    step: int
    loads: Dict[str, Hits] = field(default_factory=dict)   # request id -> hits of its admission
    layer_ready_ns: List[int] = field(default_factory=list)
    rejected: List[str] = field(default_factory=list)       # admissions kvtier could not take
    failed_grows: List[str] = field(default_factory=list)


class KvtierConnectorScheduler:
    """vLLM's scheduler-side connector API over a ``Client`` that has said hello."""

    def __init__(self, client: Client):
        if client.engine is None:
            raise ValueError("say hello first: the connector needs a registered engine")
        self._client = client
        self._req_of: Dict[str, int] = {}
        self._next_req = 1
        self._allocated: Dict[str, bool] = {}        # request id -> allocation ready
        self._admitting: Dict[str, int] = {}         # admitted in the step being built: tokens
        self._scheduled: Dict[str, int] = {}         # tokens covered after the last built step
        self._computed: Dict[str, int] = {}          # tokens whose KV exists (reported)
        self._finished_pending: List[str] = []

    def _req(self, request_id: str) -> int:
        if request_id not in self._req_of:
            self._req_of[request_id] = self._next_req
            self._next_req += 1
        return self._req_of[request_id]

    # -- vLLM's scheduler-side methods ----------------------------------------------------------

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        rid = request.request_id
        req = self._req(rid)
        tokens = list(request.prompt_token_ids)
        if rid not in self._allocated:
            alloc = self._client.allocate(req, Prompt(tokens=tokens))
        else:
            alloc = self._client.allocate(req) if not self._allocated[rid] else None
        if alloc is not None:
            self._allocated[rid] = alloc.ready
        if not self._allocated[rid]:
            return None, False
        hits = self._client.lookup(Prompt(tokens=tokens))
        held = min(hits.tokens, max(len(tokens) - 1, 0))
        return max(held - num_computed_tokens, 0), False

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        del blocks  # kvtier chooses the device blocks and the loads itself
        # The step's scheduled tokens come after what the engine holds and what kvtier loads.
        start = int(getattr(request, "num_computed_tokens", 0)) + int(num_external_tokens)
        self._admitting[request.request_id] = start

    def build_connector_meta(self, scheduler_output: Any) -> KvtierConnectorMetadata:
        scheduled: Dict[str, int] = dict(getattr(scheduler_output, "num_scheduled_tokens", {}))
        finished = set(getattr(scheduler_output, "finished_req_ids", set()))
        finished.update(self._finished_pending)
        self._finished_pending = []
        work = StepWork()
        # The previous step's tokens have been computed by now.
        for rid, covered in self._scheduled.items():
            if rid in finished:
                continue
            if covered > self._computed.get(rid, 0):
                work.computed.append((self._req_of[rid], covered))
                self._computed[rid] = covered
        for rid in sorted(finished):
            if rid in self._req_of and rid in self._allocated:
                work.finished.append(self._req_of[rid])
                self._forget(rid)
        admits: List[str] = []
        for rid, n in scheduled.items():
            if rid in finished or rid not in self._req_of:
                continue
            start = self._admitting.get(rid, self._scheduled.get(rid, 0))
            target = start + n
            if rid in self._admitting:
                work.admits.append((self._req_of[rid], target))
                admits.append(rid)
            elif rid in self._scheduled:
                work.grows.append((self._req_of[rid], target))
            self._scheduled[rid] = target
        self._admitting.clear()
        reply = self._client.step(work)
        meta = KvtierConnectorMetadata(reply.step, layer_ready_ns=reply.layer_ready_ns)
        by_req = {v: k for k, v in self._req_of.items()}
        for a in reply.admits:
            rid = by_req.get(a.req)
            if rid is None:
                continue
            if a.admitted:
                meta.loads[rid] = a.hits
            else:
                meta.rejected.append(rid)
                self._scheduled.pop(rid, None)
        meta.failed_grows = [by_req[r] for r in reply.failed_grows if r in by_req]
        return meta

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[dict]]:
        del block_ids
        rid = request.request_id
        if rid in self._req_of and rid in self._allocated:
            self._client.finish(self._req_of[rid])
            self._forget(rid)
        return False, None

    def _forget(self, rid: str) -> None:
        self._allocated.pop(rid, None)
        self._scheduled.pop(rid, None)
        self._computed.pop(rid, None)
        self._admitting.pop(rid, None)
        self._req_of.pop(rid, None)
