"""The worker role of ``KvtierConnector`` (vLLM v0.11.0's worker-side methods).

Here, on the CPU path (no torch, no GPU), the KV caches vLLM registers are numpy arrays, or any
object whose first axis (or second, for a ``[2, num_blocks, ...]`` K/V pair) indexes blocks.
kvtier serve's modelled backend keeps no KV bytes, so a load writes a marker into each block
kvtier named: the block's position in its request plus one, in every layer. Tests check where
the loads went. A real-mode worker would instead wait on the server's per-layer IPC events
(docs/protocol.md, real mode), which version 3 does not yet carry.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple


def _block_axis(cache: Any) -> int:
    shape = getattr(cache, "shape", None)
    # vLLM's FlashAttention layout puts K and V first: [2, num_blocks, block_size, heads, dim].
    return 1 if shape is not None and len(shape) >= 3 and shape[0] == 2 else 0


class KvtierWorkerSide:
    """Mixed into ``KvtierConnector``; the state lives on the connector."""

    def _init_worker(self) -> None:
        self._kv_caches: Dict[str, Any] = {}
        self._recving: Set[str] = set()
        self._load_errors: Set[int] = set()
        self.layers_loaded: List[str] = []                 # wait_for_layer_load, in order
        self.saved: List[Tuple[str, List[int]]] = []       # save_kv_layer: layer, blocks

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        self._kv_caches = dict(kv_caches)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        self.layers_loaded = []
        self._load_errors |= set(meta.load_errors)
        for rid, blocks in meta.loads.items():
            for cache in self._kv_caches.values():
                axis = _block_axis(cache)
                for block, position in blocks:
                    if axis == 0:
                        cache[block] = position + 1
                    else:
                        cache[:, block] = position + 1
            if rid in meta.async_loads:
                self._recving.add(rid)

    def wait_for_layer_load(self, layer_name: str) -> None:
        # The CPU path loads every layer in start_load_kv: nothing is left to wait for.
        self.layers_loaded.append(layer_name)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        # kvtier's write policy decides the copies and the server reads the engine's blocks
        # itself; the worker only notes which blocks became full this step.
        meta = self._get_connector_metadata()
        blocks = [b for ids in meta.saves.values() for b in ids]
        if blocks:
            self.saved.append((layer_name, blocks))

    def wait_for_save(self) -> None:
        return None

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        recving, self._recving = self._recving, set()
        return None, (recving or None)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors
