"""What differs between the vLLM releases the connector runs under, read by feature detection
(docs/vllm.md, "The releases"): the connector never asks which version it runs in, it looks for
the field or argument a release has.

- ``CachedRequestData`` says which scheduled requests resumed from preemption as
  ``resumed_from_preemption: list[bool]`` (v0.11.0) or ``resumed_req_ids: set[str]`` (v0.11.1
  on); ``SchedulerOutput.preempted_req_ids`` (later releases) names the requests preempted in
  the step, where v0.11.0 names none.
- ``handle_preemptions`` receives the preempted ids (``set[str]``, the releases that added it)
  or the step's connector metadata (later ones).
- ``KVCacheBlocks.get_block_ids()`` gives one list of block ids per KV cache group.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set


class VllmShapeError(RuntimeError):
    """A vLLM structure of none of the shapes the connector knows."""


def resumed_ids(cached: Any) -> Set[str]:
    """The ids of ``scheduled_cached_reqs`` that resumed from preemption (their
    ``new_block_ids`` are their whole table, not new blocks)."""
    if cached is None:
        return set()
    ids = getattr(cached, "resumed_req_ids", None)
    if ids is not None:
        return set(ids)
    flags = getattr(cached, "resumed_from_preemption", None)
    if flags is not None:
        return {rid for rid, resumed in zip(cached.req_ids, flags) if resumed}
    raise VllmShapeError("CachedRequestData has neither resumed_req_ids (vLLM >= 0.11.1) nor "
                         "resumed_from_preemption (vLLM 0.11.0): a vLLM the connector does not "
                         "know")


def preempted_ids(scheduler_output: Any) -> Optional[Set[str]]:
    """The requests vLLM preempted in this step; None where the release does not say."""
    ids = getattr(scheduler_output, "preempted_req_ids", None)
    return None if ids is None else set(ids)


def preempted_of_hook(argument: Any) -> Set[str]:
    """``handle_preemptions``' argument: the ids themselves, or the step's metadata (whose
    ``preempted`` the scheduler role filled)."""
    if isinstance(argument, (set, frozenset, list, tuple)):
        return set(argument)
    return set(getattr(argument, "preempted", None) or ())


def group0(block_ids: Any) -> List[int]:
    """The block ids of the first KV cache group, from ``KVCacheBlocks`` (``get_block_ids()``:
    a tuple of lists) or from such a tuple."""
    if hasattr(block_ids, "get_block_ids"):
        block_ids = block_ids.get_block_ids()
    if not block_ids:
        return []
    first = block_ids[0]
    return list(first) if isinstance(first, (list, tuple)) else list(block_ids)


def scheduled_requests(out: Any) -> List[tuple]:
    """(request id, block ids of group 0 or None, whether they are its whole table,
    num_computed_tokens) of every request a scheduler output schedules: new ones carry their
    whole table; cached ones their new blocks, or (resumed from preemption) their whole table."""
    rows: List[tuple] = []
    for n in getattr(out, "scheduled_new_reqs", None) or ():
        rows.append((n.req_id, group0(n.block_ids), True, int(n.num_computed_tokens)))
    cached = getattr(out, "scheduled_cached_reqs", None)
    if cached is not None:
        resumed = resumed_ids(cached)
        for i, rid in enumerate(cached.req_ids):
            new = cached.new_block_ids[i]
            rows.append((rid, group0(new) if new is not None else None, rid in resumed,
                         int(cached.num_computed_tokens[i])))
    return rows


def kv_cache_groups(kv_cache_config: Any) -> int:
    """How many KV cache groups vLLM's cache has (1 without the hybrid allocator)."""
    groups = getattr(kv_cache_config, "kv_cache_groups", None)
    return 1 if groups is None else len(groups)


_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16",
           "fp16": "fp16", "float32": "fp32", "float": "fp32", "fp32": "fp32"}


def _dtype_name(value: Any) -> Optional[str]:
    text = str(value).replace("torch.", "").lower()
    if text.startswith("fp8") or "float8" in text:
        return "fp8"
    return _DTYPES.get(text)


def model_facts(vllm_config: Any, kv_cache_config: Any) -> Dict[str, Any]:
    """What vLLM's config says of the model's KV and of its pool, where the release has it:
    ``layers``, ``kv_heads``, ``head_dim``, ``kv_dtype``, ``device_blocks`` (keys absent where
    unknown), each with the vLLM attribute it came from."""
    facts: Dict[str, Any] = {}
    model = getattr(vllm_config, "model_config", None)
    parallel = getattr(vllm_config, "parallel_config", None)
    cache = getattr(vllm_config, "cache_config", None)

    def ask(name, method, *args):
        f = getattr(model, method, None)
        if callable(f):
            try:
                facts[name] = (int(f(*args)), f"model_config.{method}()")
            except Exception:  # a release whose method needs what this config lacks
                pass
    if model is not None:
        ask("layers", "get_num_layers", parallel)
        ask("kv_heads", "get_num_kv_heads", parallel)
        ask("head_dim", "get_head_size")
    dtype = getattr(cache, "cache_dtype", None)
    if dtype in (None, "auto"):
        dtype = getattr(model, "dtype", None)
    name = _dtype_name(dtype) if dtype is not None else None
    if name:
        facts["kv_dtype"] = (name, "cache_config.cache_dtype")
    blocks = getattr(kv_cache_config, "num_blocks", None)
    source = "kv_cache_config.num_blocks"
    if blocks is None:
        blocks, source = getattr(cache, "num_gpu_blocks", None), "cache_config.num_gpu_blocks"
    if blocks:
        facts["device_blocks"] = (int(blocks), source)
    return facts
