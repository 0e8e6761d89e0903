"""The worker role of ``KvtierConnector``: the methods vLLM's model runner calls, in both
generations' order (docs/vllm.md, "Worker role"), over a data path that moves the KV.

vLLM calls, each step: ``bind_connector_metadata``; ``handle_preemptions`` (releases that have
it, with the preempted ids or the metadata); ``start_load_kv`` before the forward (v0.11.0, and
later releases when the step has synchronous loads) or after it (later releases, asynchronous
loads only); per attention layer ``wait_for_layer_load`` then ``save_kv_layer``;
``wait_for_save``; ``get_finished`` (through ``get_transfer_results`` where it exists);
``get_block_ids_with_load_errors``; ``get_kv_connector_stats``; ``build_connector_worker_meta``
(later releases); ``clear_connector_metadata``.

The data path is what moves bytes between kvtier and vLLM's KV tensors. ``ModelledDataPath``
serves a modelled ``kvtier serve``, which keeps no KV bytes: a load writes a marker into each
block kvtier named (the block's position in its request, plus one, in every layer), so that tests
see where loads went; it never claims to move KV (``moves_bytes`` is False). A data path that
moves real bytes implements the same five methods (``register``, ``start_loads``,
``wait_layer``, ``save_layer``, ``finish_step``) and sets ``moves_bytes``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from .vllm_base import KVConnectorStats
from .vllm_compat import preempted_of_hook


def kv_layout(cache: Any) -> str:
    """How a layer's KV tensor is laid out, by its shape: ``"flash"`` for FlashAttention's
    ``[2, num_blocks, block_size, kv_heads, head_dim]`` (K and V first), ``"blocks"`` for a
    tensor indexed by block first (MLA's latent ``[num_blocks, block_size, kv_lora_rank +
    rope_dim]``, and the tests' ``[num_blocks, ...]``)."""
    shape = getattr(cache, "shape", None)
    return "flash" if shape is not None and len(shape) >= 4 and shape[0] == 2 else "blocks"


class ModelledDataPath:
    """Loads write markers, saves read nothing: a modelled server has no KV bytes."""

    moves_bytes = False

    def __init__(self) -> None:
        self.kv_caches: Dict[str, Any] = {}

    def register(self, kv_caches: Dict[str, Any]) -> None:
        self.kv_caches = dict(kv_caches)

    def start_loads(self, loads: Dict[str, List[Tuple[int, int]]], meta: Any) -> None:
        for cache in self.kv_caches.values():
            flash = kv_layout(cache) == "flash"
            for blocks in loads.values():
                for block, position in blocks:
                    if flash:
                        cache[:, block] = position + 1
                    else:
                        cache[block] = position + 1

    def wait_layer(self, layer_name: str) -> None:
        return None  # every layer was written in start_loads

    def save_layer(self, layer_name: str, kv_layer: Any, blocks: List[int]) -> None:
        return None  # the server reads nothing from a modelled device

    def finish_step(self) -> None:
        return None

    def stop_reading(self, request_ids: Set[str]) -> None:
        return None


@dataclass
class KvtierConnectorStats(KVConnectorStats):
    """Counters of one interval, summed over the workers and the scheduler role: vLLM's
    KVConnectorStats interface (``aggregate``, ``reduce``, ``is_empty``, ``reset``)."""
    data: Dict[str, Any] = field(default_factory=dict)

    def reset(self) -> None:
        self.data = {}

    def add(self, key: str, n: float = 1) -> None:
        self.data[key] = self.data.get(key, 0) + n

    def aggregate(self, other: Any) -> "KvtierConnectorStats":
        for k, v in (getattr(other, "data", None) or {}).items():
            if isinstance(v, (int, float)):
                self.add(k, v)
        return self

    def reduce(self) -> Dict[str, float]:
        return dict(self.data)

    def is_empty(self) -> bool:
        return not any(self.data.values())

    def clone_and_reset(self) -> "KvtierConnectorStats":
        out = KvtierConnectorStats(dict(self.data))
        self.reset()
        return out


class KvtierWorkerSide:
    """Mixed into ``KvtierConnector``; the state lives on the connector."""

    def _init_worker(self, data_path: Any = None) -> None:
        self._data = data_path or ModelledDataPath()
        self._recving: Set[str] = set()      # asynchronous loads landed, for get_finished
        self._load_errors: Set[int] = set()
        self._loads_started = False           # start_load_kv ran for the bound metadata
        self._worker_stats = KvtierConnectorStats()
        self.layers_loaded: List[str] = []    # wait_for_layer_load, in order, this step
        self.saved: List[Tuple[str, List[int]]] = []  # save_kv_layer: layer, blocks, this step
        self.preempted_seen: Set[str] = set()

    @property
    def data_path(self) -> Any:
        return self._data

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        self._data.register(kv_caches)

    def bind_connector_metadata(self, connector_metadata: Any) -> None:
        super().bind_connector_metadata(connector_metadata)  # type: ignore[misc]
        self._loads_started = False
        self.layers_loaded, self.saved = [], []

    def handle_preemptions(self, kv_connector_metadata: Any) -> None:
        """Later releases: before a preempted request's blocks are reused. The argument is the
        preempted ids (the releases that added the hook) or the step's metadata (later ones)."""
        ids = preempted_of_hook(kv_connector_metadata)
        self.preempted_seen |= ids
        self._data.stop_reading(ids)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        self._loads_started = True
        self._load_errors |= set(meta.load_errors)
        self._data.start_loads(meta.loads, meta)
        self._worker_stats.add("loads", sum(1 for b in meta.loads.values() if b))
        self._worker_stats.add("loaded_blocks", sum(len(b) for b in meta.loads.values()))
        self._worker_stats.add("load_errors", len(meta.load_errors))
        self._recving |= set(meta.async_loads) | set(meta.recv_done)

    def wait_for_layer_load(self, layer_name: str) -> None:
        # Later releases may run the forward before start_load_kv when the step has no
        # synchronous load: nothing of this step is loading then.
        t0 = time.perf_counter()
        if self._loads_started:
            self._data.wait_layer(layer_name)
        self._worker_stats.add("layer_wait_s", time.perf_counter() - t0)
        self.layers_loaded.append(layer_name)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        blocks = [b for ids in meta.saves.values() for b in ids]
        self._data.save_layer(layer_name, kv_layer, blocks)
        if blocks:
            self.saved.append((layer_name, blocks))

    def wait_for_save(self) -> None:
        self._data.finish_step()

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        recving, self._recving = self._recving, set()
        return None, (recving or None)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors

    def build_connector_worker_meta(self) -> Any:
        return None  # the scheduler role learns what it needs from kvtier serve itself
