"""The worker role of ``KvtierConnector`` (vLLM's worker-side methods), moving real KV bytes.

``register_kv_caches`` attaches vLLM's KV tensors to kvtier serve (kv_attach.py): on the GPU
through CUDA IPC (``kvtier serve --backend cuda``), on the CPU in shared memory (``--backend
shm``). kvtier's copies then write and read those tensors themselves: a host or storage hit is
swapped into the block ids the step's admission names, layer by layer, and
``wait_for_layer_load`` waits for each layer (the GPU: the engine's stream waits on the layer's
IPC event; the CPU: the host waits on the layer's signal word). Saves are kvtier's: its write
policy reads the blocks vLLM computed, once the forward that wrote them has said so
(``wait_for_save``). The worker itself writes nothing into vLLM's tensors.

Where the tensors cannot be attached (a modelled server, tensors in private memory), nothing is
loaded: every block kvtier would have loaded is reported in ``get_block_ids_with_load_errors``
and vLLM computes it (docs/vllm.md, "The worker").
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Set, Tuple

from .client import Client, KvtierError
from .kv_attach import DEFAULT_EVENT_SLOTS, AttachedKv, attach_caches
from .kv_memory import LayoutError


def _extra_of(vllm_config: Any) -> Dict[str, Any]:
    ktc = getattr(vllm_config, "kv_transfer_config", None)
    return dict(getattr(ktc, "kv_connector_extra_config", None) or {})


class KvtierWorkerSide:
    """Mixed into ``KvtierConnector``; the state lives on the connector."""

    def _init_worker(self) -> None:
        self._kv_caches: Dict[str, Any] = {}
        self._attached: Optional[AttachedKv] = None
        self._worker_client: Optional[Client] = None
        self.attach_error: Optional[str] = None  # why the tensors are not attached
        self._recving: Dict[str, Tuple[int, int]] = {}  # request -> its swap-in (slot, record)
        self._load_errors: Set[int] = set()
        self._swap: Optional[Tuple[int, int]] = None    # this step's swap-in (slot, record)
        self._waited: Set[int] = set()                  # its layers waited for
        self._step = 0
        self.layers_loaded: List[str] = []                 # wait_for_layer_load, in order
        self.layer_waits_ns: List[Tuple[int, int]] = []    # (layer, ns the host waited)
        self.saved: List[Tuple[str, List[int]]] = []       # save_kv_layer: layer, blocks

    # -- registration ----------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        self._kv_caches = dict(kv_caches)
        extra = _extra_of(self._vllm_config)
        model = extra.get("kvtier.model")
        if model is None:
            self.attach_error = "kv_connector_extra_config lacks kvtier.model"
            return
        client = extra.get("kvtier.worker_client")  # an open Client (tests); else connect
        try:
            if client is None:
                client = Client(str(extra.get("kvtier.endpoint", "tcp://127.0.0.1:5557")),
                                extra.get("kvtier.token"))
                self._worker_client = client
            self._attached = attach_caches(
                client, self._kv_caches, dict(model), int(self._vllm_config.cache_config.block_size),
                int(extra.get("kvtier.event_slots", DEFAULT_EVENT_SLOTS)),
                bool(extra.get("kvtier.host_waits", False)))
        except (KvtierError, LayoutError, OSError, RuntimeError) as e:
            # RuntimeError covers cuda_driver.CudaError; a server that is not there times out.
            self.attach_error = str(e)
            if bool(extra.get("kvtier.require_real", False)):
                raise
            print(f"kvtier: the KV tensors are not attached, so nothing is loaded (vLLM computes "
                  f"every hit): {e}", file=sys.stderr)

    @property
    def attached(self) -> Optional[AttachedKv]:
        return self._attached

    # -- loads -----------------------------------------------------------------------------------

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        self.layers_loaded = []
        self.layer_waits_ns = []
        self._step = int(getattr(meta, "step", 0) or 0)
        self._load_errors |= set(meta.load_errors)
        swap = getattr(meta, "swap_in", None)
        self._swap, self._waited = None, set()
        if not meta.loads:
            return
        if self._attached is None or swap is None:
            # Nothing moved these blocks' bytes: vLLM must compute them.
            for rid, blocks in meta.loads.items():
                self._load_errors |= {b for b, _ in blocks}
                if rid in meta.async_loads:
                    self._recving[rid] = (-1, 0)
            return
        slot, record = int(swap["slot"]), int(swap["record"])
        for rid in meta.loads:
            if rid in meta.async_loads:
                self._recving[rid] = (slot, record)
        if any(rid not in meta.async_loads for rid in meta.loads):
            self._swap = (slot, record)  # a synchronous load: this forward waits per layer

    def wait_for_layer_load(self, layer_name: str) -> None:
        self.layers_loaded.append(layer_name)
        if self._swap is None or self._attached is None:
            return
        layer = self._attached.index.get(layer_name)
        if layer is None or layer in self._waited:
            return
        self._waited.add(layer)
        ns = self._attached.wait_layer(self._swap[0], self._swap[1], layer)
        self.layer_waits_ns.append((layer, ns))

    # -- saves -----------------------------------------------------------------------------------

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        # kvtier's write policy decides the copies and the server reads vLLM's blocks itself;
        # the worker only notes which blocks became full this step.
        meta = self._get_connector_metadata()
        blocks = [b for ids in meta.saves.values() for b in ids]
        if blocks:
            self.saved.append((layer_name, blocks))

    def wait_for_save(self) -> None:
        """The forward is over: a layer vLLM never asked about is waited for now (nothing is
        left half written), and kvtier may read what this forward computed."""
        if self._swap is not None and self._attached is not None:
            for layer in range(self._attached.layers):
                if layer not in self._waited:
                    self._waited.add(layer)
                    self._attached.wait_layer(self._swap[0], self._swap[1], layer)
        if self._attached is not None and self._step:
            self._attached.forward_done(self._step)

    # -- completion ------------------------------------------------------------------------------

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        """Asynchronous loads whose every layer has landed (an abort included: vLLM frees such
        blocks only once they are reported here, so none is reused half written)."""
        done = {rid for rid, (slot, record) in self._recving.items()
                if slot < 0 or self._attached is None or self._attached.landed(slot, record)}
        for rid in done:
            del self._recving[rid]
        return None, (done or None)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors

    def _shutdown_worker(self) -> None:
        if self._attached is not None:
            self._attached.close()
            self._attached = None
        if self._worker_client is not None:
            self._worker_client.close()
            self._worker_client = None
