"""The worker's side of kvtier serve's real mode (docs/protocol.md, "Real mode"): vLLM's KV
tensors attached to the server (``attach``), and the per-layer completion of the swap-ins the
server runs into them.

``attach_caches`` describes the tensors (kv_memory.py), exports them (CUDA IPC, or shared
memory names), creates the completion signals (IPC events, or a signal segment) and sends
``attach``. The object it returns waits for a swap-in's layers, says whether one has landed, and
tells the server when a forward has written its KV.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from . import kv_memory
from .client import Client

DEFAULT_EVENT_SLOTS = 8


class AttachedKv:
    """vLLM's tensors, attached. ``slot``/``record``: what a step reply's ``swap_in`` names."""

    memory = ""

    def __init__(self, names: List[str], layout: kv_memory.KvLayout, event_slots: int):
        self.names = names
        self.index = {n: i for i, n in enumerate(names)}
        self.layout = layout
        self.event_slots = event_slots
        self.layers = len(names)

    def wait_layer(self, slot: int, record: int, layer: int) -> int:
        """Waits until the swap-in's `layer` is in place (or orders the engine's stream after
        it); returns the nanoseconds the host waited."""
        raise NotImplementedError

    def landed(self, slot: int, record: int) -> bool:
        raise NotImplementedError

    def forward_done(self, step: int) -> None:
        """The forward of kvtier step `step` has written its KV (saves may read it)."""

    def close(self) -> None:
        pass


class ShmAttached(AttachedKv):
    memory = "shm"

    def __init__(self, names, layout, event_slots, signals: kv_memory.Signals):
        super().__init__(names, layout, event_slots)
        self.signals = signals

    def wait_layer(self, slot: int, record: int, layer: int) -> int:
        t0 = time.perf_counter_ns()
        self.signals.wait(slot * self.layers + layer, record)
        return time.perf_counter_ns() - t0

    def landed(self, slot: int, record: int) -> bool:
        return all(self.signals.landed(slot * self.layers + l, record)
                   for l in range(self.layers))

    def forward_done(self, step: int) -> None:
        self.signals.set_forward(step)

    def close(self) -> None:
        self.signals.close()


class CudaAttached(AttachedKv):
    """IPC events, slot-major; the engine's stream waits on them (no host wait) unless
    ``host_waits``, which also blocks the host until the layer is in place and times it (the
    GPU check's per-layer waits)."""

    memory = "cuda_ipc"

    def __init__(self, names, layout, event_slots, events: List[int], host_waits: bool):
        super().__init__(names, layout, event_slots)
        self.events = events
        self.host_waits = host_waits
        self.stream: Optional[int] = None  # None: torch's current stream, else the legacy one

    def _stream(self) -> int:
        if self.stream is not None:
            return self.stream
        try:  # pragma: no cover - where torch is installed
            import torch  # type: ignore
            return int(torch.cuda.current_stream().cuda_stream)
        except ImportError:
            return 0

    def wait_layer(self, slot: int, record: int, layer: int) -> int:
        from . import cuda_driver
        ev = self.events[slot * self.layers + layer]
        cuda_driver.stream_wait_event(self._stream(), ev)
        if not self.host_waits:
            return 0
        t0 = time.perf_counter_ns()
        cuda_driver.event_synchronize(ev)
        return time.perf_counter_ns() - t0

    def landed(self, slot: int, record: int) -> bool:
        from . import cuda_driver
        # A later record of the slot lands after this one (one stream): done means done.
        return all(cuda_driver.event_done(self.events[slot * self.layers + l])
                   for l in range(self.layers))

    def close(self) -> None:
        from . import cuda_driver
        for ev in self.events:
            try:
                cuda_driver.event_destroy(ev)
            except cuda_driver.CudaError:
                pass
        self.events = []


def describe(kv_caches: Dict[str, Any], model: Dict[str, Any], block_size: int
             ) -> Tuple[List[str], List[kv_memory.TensorView], kv_memory.KvLayout]:
    names = list(kv_caches)
    if not names:
        raise kv_memory.LayoutError("vLLM registered no KV caches")
    views = [kv_memory.view_of(kv_caches[n]) for n in names]
    layouts = [kv_memory.layout_of(v) for v in views]
    if any(l != layouts[0] for l in layouts) or any(v.on_gpu != views[0].on_gpu for v in views):
        raise kv_memory.LayoutError("vLLM's layers differ in shape, strides or device: kvtier "
                                    "copies one layout for every layer")
    if len(names) != int(model["layers"]):
        raise kv_memory.LayoutError(f"vLLM registered {len(names)} KV caches; kvtier.model has "
                                    f"{model['layers']} layers")
    kv_memory.check_model(layouts[0], model, block_size)
    return names, views, layouts[0]


def _tensors(memory: str, layout: kv_memory.KvLayout, layers: List[List[Any]],
             event_slots: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"memory": memory, "device_blocks": layout.num_blocks,
                           "layers": layers, "event_slots": event_slots,
                           "block_stride": layout.block_stride}
    if layout.halves == 2:
        out["half_stride"] = layout.half_stride
    return out


def attach_caches(client: Client, kv_caches: Dict[str, Any], model: Dict[str, Any],
                  block_size: int, event_slots: int = DEFAULT_EVENT_SLOTS,
                  host_waits: bool = False) -> AttachedKv:
    """Describes, exports and attaches vLLM's KV tensors; raises LayoutError (tensors that do
    not fit), KvtierError (refused by the server: a modelled server, another engine's tensors
    attached, ...) or cuda_driver.CudaError."""
    names, views, layout = describe(kv_caches, model, block_size)
    span = kv_memory.layer_span(layout)
    if views[0].on_gpu:
        from . import cuda_driver
        layers, handles = [], {}
        for v in views:
            base, size = cuda_driver.allocation_of(v.ptr)
            if v.ptr + span > base + size:
                raise kv_memory.LayoutError(f"a layer's KV runs past its allocation "
                                            f"({size} bytes)")
            if base not in handles:
                handles[base] = cuda_driver.ipc_mem_handle(base)
            layers.append([handles[base], v.ptr - base])
        made = [cuda_driver.ipc_event() for _ in range(event_slots * len(names))]
        tensors = _tensors("cuda_ipc", layout, layers, event_slots)
        tensors["events"] = [h for _, h in made]
        attached: AttachedKv = CudaAttached(names, layout, event_slots, [e for e, _ in made],
                                            host_waits)
    else:
        layers = [list(kv_memory.shm_segment_of(v.ptr, span)) for v in views]
        signals = kv_memory.Signals(event_slots * len(names))
        tensors = _tensors("shm", layout, layers, event_slots)
        tensors["signals"] = signals.name
        attached = ShmAttached(names, layout, event_slots, signals)
    try:
        client.call("attach", model=model, block_size=block_size, tensors=tensors)
    except Exception:
        attached.close()
        raise
    return attached
