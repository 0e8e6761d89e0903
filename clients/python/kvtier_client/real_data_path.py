"""The worker's data path that moves real KV bytes (docs/vllm.md, "The data path").

``register`` attaches vLLM's KV tensors to ``kvtier serve`` (kv_attach.py): on the GPU through
CUDA IPC (``--backend cuda``), on the CPU in POSIX shared memory (``--backend shm``). From then
on kvtier's own copies write and read them: a host or storage hit is swapped into the block ids
of the step's admission, layer by layer, and ``wait_layer`` waits for each layer (the GPU: the
engine's stream waits on the layer's IPC event; the CPU: the host waits on the layer's signal
word); saves are kvtier's, its write policy reading the blocks vLLM computed once the forward
that wrote them has said so (``finish_step``). The worker writes nothing into vLLM's tensors.

Where the tensors cannot be attached (a modelled server, tensors in private memory) nothing is
loaded: ``start_loads`` returns every block it was asked to load, which the worker reports in
``get_block_ids_with_load_errors``, and vLLM computes them (``kvtier.require_real``: refuse to
start instead).
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Set, Tuple

from .client import Client, KvtierError
from .kv_attach import DEFAULT_EVENT_SLOTS, AttachedKv, attach_caches
from .kv_memory import LayoutError


class RealDataPath:
    """vLLM's tensors attached to kvtier serve; loads are kvtier's swap-ins into them."""

    moves_bytes = True

    def __init__(self, endpoint: str, model: Optional[Dict[str, Any]], block_size: int,
                 token: Optional[str] = None, event_slots: int = DEFAULT_EVENT_SLOTS,
                 host_waits: bool = False, require: bool = False,
                 client: Optional[Client] = None):
        self.endpoint, self.token = endpoint, token
        self.model, self.block_size = model, block_size
        self.event_slots, self.host_waits, self.require = event_slots, host_waits, require
        self._client = client          # an open Client (tests); else one of its own
        self._own_client: Optional[Client] = None
        self.attached: Optional[AttachedKv] = None
        self.attach_error: Optional[str] = None
        self._swap: Optional[Tuple[int, int]] = None      # this step's swap-in (slot, record)
        self._waited: Set[int] = set()                    # its layers waited for
        self._async: Dict[str, Tuple[int, int]] = {}      # request -> its swap-in
        self._step = 0
        self.layer_waits_ns: List[Tuple[int, int]] = []   # this step: (layer, ns the host waited)

    @classmethod
    def from_extra(cls, extra: Dict[str, Any], block_size: int) -> "RealDataPath":
        return cls(str(extra.get("kvtier.endpoint", "tcp://127.0.0.1:5557")),
                   extra.get("kvtier.model"), block_size, extra.get("kvtier.token"),
                   int(extra.get("kvtier.event_slots", DEFAULT_EVENT_SLOTS)),
                   bool(extra.get("kvtier.host_waits", False)),
                   bool(extra.get("kvtier.require_real", False)),
                   extra.get("kvtier.worker_client"))

    # -- registration ----------------------------------------------------------------------------

    def register(self, kv_caches: Dict[str, Any]) -> None:
        """Attaches the tensors once (vLLM registers them once per worker, before its scheduler
        says hello: a real server refuses a hello before any attach)."""
        if self.attached is not None:
            return
        try:
            if self.model is None:
                raise LayoutError("kv_connector_extra_config lacks kvtier.model")
            client = self._client
            if client is None:
                client = self._own_client = Client(self.endpoint, self.token)
            self.attached = attach_caches(client, dict(kv_caches), dict(self.model),
                                          self.block_size, self.event_slots, self.host_waits)
        except (KvtierError, LayoutError, OSError, RuntimeError, TimeoutError) as e:
            # RuntimeError covers cuda_driver.CudaError; a server that is not there times out.
            self.attach_error = str(e)
            if self.require:
                raise
            print(f"kvtier: vLLM's KV tensors are not attached, so nothing is loaded (vLLM "
                  f"computes every hit): {e}", file=sys.stderr)

    # -- loads -----------------------------------------------------------------------------------

    def bind(self, meta: Any) -> None:
        """A step's metadata, before its forward: the kvtier step that forward computes for."""
        self._step = int(getattr(meta, "step", 0) or 0)
        self._swap, self._waited, self.layer_waits_ns = None, set(), []

    def start_loads(self, loads: Dict[str, List[Tuple[int, int]]], meta: Any) -> Set[int]:
        if not any(loads.values()):
            return set()
        swap = getattr(meta, "swap_in", None)
        if self.attached is None or swap is None:
            # Nothing moved these blocks' bytes: vLLM must compute them.
            return {b for blocks in loads.values() for b, _ in blocks}
        slot, record = int(swap["slot"]), int(swap["record"])
        async_loads = getattr(meta, "async_loads", set())
        for rid, blocks in loads.items():
            if not blocks:
                continue
            if rid in async_loads:
                self._async[rid] = (slot, record)
            else:
                self._swap = (slot, record)  # a synchronous load: this forward waits per layer
        return set()

    def wait_layer(self, layer_name: str) -> None:
        if self._swap is None or self.attached is None:
            return
        layer = self.attached.index.get(layer_name)
        if layer is None or layer in self._waited:
            return
        self._waited.add(layer)
        ns = self.attached.wait_layer(self._swap[0], self._swap[1], layer)
        self.layer_waits_ns.append((layer, ns))

    def landed(self, request_id: str) -> bool:
        at = self._async.get(request_id)
        if at is None:
            return True
        if self.attached is not None and not self.attached.landed(*at):
            return False
        del self._async[request_id]
        return True

    # -- saves -----------------------------------------------------------------------------------

    def save_layer(self, layer_name: str, kv_layer: Any, blocks: List[int]) -> None:
        return None  # kvtier reads vLLM's blocks itself, after finish_step

    def finish_step(self) -> None:
        """The forward is over: a layer vLLM never asked about is waited for now (nothing is
        left half written), and kvtier may read what this forward computed."""
        if self._swap is not None and self.attached is not None:
            for layer in range(self.attached.layers):
                if layer not in self._waited:
                    self._waited.add(layer)
                    self.attached.wait_layer(self._swap[0], self._swap[1], layer)
        if self.attached is not None and self._step:
            self.attached.forward_done(self._step)

    def stop_reading(self, request_ids: Set[str]) -> None:
        # kvtier orders its reads of a preempted request's blocks before any step that names
        # them again (docs/protocol.md, "Real mode"): nothing to do here.
        return None

    def close(self) -> None:
        if self.attached is not None:
            self.attached.close()
            self.attached = None
        if self._own_client is not None:
            self._own_client.close()
            self._own_client = None


def data_path_of(extra: Dict[str, Any], block_size: int) -> Any:
    """``kvtier.data_path``: ``"real"`` (the default) or ``"modelled"`` (markers, for tests of a
    modelled server); ``kvtier.data_path_object``, an object given whole, wins."""
    given = extra.get("kvtier.data_path_object")
    if given is not None:
        return given
    kind = str(extra.get("kvtier.data_path", "real"))
    if kind == "real":
        return RealDataPath.from_extra(extra, block_size)
    if kind == "modelled":
        from .vllm_worker import ModelledDataPath
        return ModelledDataPath()
    raise ValueError(f"kvtier.data_path is 'real' or 'modelled', not {kind!r}")
