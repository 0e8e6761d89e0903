"""vLLM's KV tensors as kvtier serve's real mode attaches them (docs/protocol.md, "Real mode").

A layer's tensor is vLLM's FlashAttention layout ``[2, num_blocks, block_size, kv_heads,
head_dim]`` (K and V), FlashInfer's ``[num_blocks, 2, block_size, kv_heads, head_dim]``, or
MLA's latent ``[num_blocks, block_size, latent_dim]``, each possibly a strided view (vLLM's
stride order): kvtier needs, per layer, where block 0's K (or latent) starts, the bytes between
blocks and between K and V, and that one block's K (or V, or latent) is one contiguous chunk.

Two memories:

- ``cuda_ipc``: tensors on the GPU (``__cuda_array_interface__``: torch, CuPy, or the driver
  API's ``cuda_driver.DeviceArray``); each layer is named by the CUDA IPC handle of its
  allocation and its offset in it; per-layer completion comes as IPC events.
- ``shm``: tensors in POSIX shared memory on the CPU (numpy arrays over a shared memory object,
  ``shm_kv_caches`` makes them); each layer is named by its object and offset, found in
  /proc/self/maps; per-layer completion comes as signal words in a segment the worker creates
  (``Signals``), which the server stores and wakes (futex) as each layer lands.
"""

from __future__ import annotations

import ctypes
import platform
import time
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

# The signal segment (docs/protocol.md, "Real mode on the CPU").
FORWARD_OFFSET = 64
SIGNALS_OFFSET = 128
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
               "int8": 1, "fp32": 4, "float32": 4}


class LayoutError(ValueError):
    """vLLM's KV tensors do not fit the model or a layout kvtier can copy."""


def signal_bytes(words: int) -> int:
    return SIGNALS_OFFSET + 4 * words


@dataclass
class TensorView:
    """One layer's KV tensor: its address, shape, strides in bytes and element size."""
    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    itemsize: int
    on_gpu: bool


def _contiguous_strides(shape: Sequence[int], itemsize: int) -> Tuple[int, ...]:
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def view_of(t: Any) -> TensorView:
    """A CUDA tensor (``__cuda_array_interface__``), a numpy array, or a torch CPU tensor."""
    cuda = getattr(t, "__cuda_array_interface__", None)
    if cuda is not None:
        shape = tuple(int(x) for x in cuda["shape"])
        itemsize = int(cuda["typestr"][2:])
        strides = cuda.get("strides") or _contiguous_strides(shape, itemsize)
        return TensorView(int(cuda["data"][0]), shape, tuple(int(s) for s in strides), itemsize,
                          True)
    if not hasattr(t, "__array_interface__") and hasattr(t, "numpy"):
        t = t.numpy()  # a torch CPU tensor: a view of the same memory
    arr = t.__array_interface__
    shape = tuple(int(x) for x in arr["shape"])
    itemsize = np.dtype(arr["typestr"]).itemsize
    strides = arr.get("strides") or _contiguous_strides(shape, itemsize)
    return TensorView(int(arr["data"][0]), shape, tuple(int(s) for s in strides), itemsize,
                      False)


@dataclass
class KvLayout:
    """What kvtier reads of a layer's tensor (the same for every layer)."""
    halves: int            # 2: K and V; 1: MLA's latent
    num_blocks: int
    block_size: int
    token_elements: int    # kv_heads x head_dim, or latent_dim
    itemsize: int
    half_stride: int       # bytes from a block's K to its V (0: MLA)
    block_stride: int      # bytes from a block to the next

    @property
    def chunk_bytes(self) -> int:
        return self.block_size * self.token_elements * self.itemsize

    def chunk_offset(self, block: int, half: int) -> int:
        return half * self.half_stride + block * self.block_stride


def _dense(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """Whether these dimensions cover one contiguous span (in any order of strides)."""
    dims = sorted((s, n) for s, n in zip(strides, shape) if n != 1)
    step = itemsize
    for s, n in dims:
        if s != step:
            return False
        step *= n
    return True


def layout_of(v: TensorView) -> KvLayout:
    """The layout of one layer's tensor: FlashAttention's, FlashInfer's or MLA's."""
    s, st = v.shape, v.strides
    if len(s) == 3:  # MLA: [num_blocks, block_size, latent_dim]
        if not _dense(s[1:], st[1:], v.itemsize):
            raise LayoutError(f"an MLA block of shape {s[1:]} and strides {st[1:]} is not one "
                              "contiguous chunk")
        return KvLayout(1, s[0], s[1], s[2], v.itemsize, 0, st[0])
    if len(s) != 5:
        raise LayoutError(f"a KV tensor of shape {s}: expected [2, num_blocks, block_size, "
                          "kv_heads, head_dim] (FlashAttention), [num_blocks, 2, ...] "
                          "(FlashInfer) or [num_blocks, block_size, latent_dim] (MLA)")
    if s[0] == 2:  # FlashAttention (also when num_blocks is 2)
        half, block, nb = st[0], st[1], s[1]
    elif s[1] == 2:
        half, block, nb = st[1], st[0], s[0]
    else:
        raise LayoutError(f"a KV tensor of shape {s} has no K/V dimension of 2")
    if not _dense(s[2:], st[2:], v.itemsize):
        raise LayoutError(f"a block's K of shape {s[2:]} and strides {st[2:]} is not one "
                          "contiguous chunk")
    return KvLayout(2, nb, s[2], s[3] * s[4], v.itemsize, half, block)


def check_model(layout: KvLayout, model: Dict[str, Any], block_size: int) -> None:
    """The tensors against the model kvtier serves (hello's ``model``) and vLLM's block size."""
    latent = int(model.get("latent_dim", 0) or 0) or (
        int(model.get("kv_lora_rank", 0) or 0) + int(model.get("rope_head_dim", 0) or 0))
    want_halves = 1 if latent else 2
    elements = latent or int(model["kv_heads"]) * int(model["head_dim"])
    dtype = str(model.get("kv_dtype", "bf16"))
    bad = []
    if layout.halves != want_halves:
        bad.append("MLA's latent" if latent else "K and V")
    if layout.token_elements != elements:
        bad.append(f"{layout.token_elements} elements per token and layer, the model "
                   f"{elements}")
    if layout.block_size != block_size:
        bad.append(f"{layout.block_size}-token blocks, vLLM's block_size {block_size}")
    if dtype in DTYPE_BYTES and layout.itemsize != DTYPE_BYTES[dtype]:
        bad.append(f"{layout.itemsize}-byte elements, kv_dtype {dtype}")
    if bad:
        raise LayoutError("vLLM's KV tensors do not match kvtier.model: " + "; ".join(bad))


# -- shared memory ---------------------------------------------------------------------------------

def _maps() -> List[Tuple[int, int, int, str]]:
    rows = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) < 6:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            rows.append((lo, hi, int(parts[2], 16), parts[5].strip()))
    return rows


def shm_segment_of(ptr: int, nbytes: int) -> Tuple[str, int]:
    """(shared memory object name, offset) of the memory [ptr, ptr + nbytes)."""
    for lo, hi, off, path in _maps():
        if lo <= ptr < hi:
            if not path.startswith("/dev/shm/") or path.endswith("(deleted)"):
                raise LayoutError(
                    f"vLLM's KV at 0x{ptr:x} is not in a named POSIX shared memory object "
                    f"({path or 'anonymous memory'}): kvtier serve --backend shm copies into "
                    "KV tensors the engine keeps in shared memory (kvtier_client.kv_memory."
                    "shm_kv_caches makes them)")
            if ptr + nbytes > hi:
                raise LayoutError(f"vLLM's KV at 0x{ptr:x} ({nbytes} bytes) runs past its "
                                  f"shared memory mapping {path}")
            return "/" + path[len("/dev/shm/"):], off + (ptr - lo)
    raise LayoutError(f"no mapping holds 0x{ptr:x}")


def layer_span(layout: KvLayout) -> int:
    return layout.chunk_offset(layout.num_blocks - 1, layout.halves - 1) + layout.chunk_bytes


class ShmKvCaches:
    """KV tensors of vLLM's shapes in one POSIX shared memory object: ``caches`` maps layer
    names to numpy arrays of ``layout``: ``"flash_attn"``'s ``[2, num_blocks, block_size,
    kv_heads, head_dim]``, ``"flashinfer"``'s ``[num_blocks, 2, block_size, kv_heads,
    head_dim]``, or, with ``latent_dim``, MLA's ``[num_blocks, block_size, latent_dim]``;
    elements of ``itemsize`` bytes (unsigned integers: numpy has no bf16). ``names``: the layer
    names (default ``{prefix}.{i}.self_attn.attn``)."""

    def __init__(self, layers: int, num_blocks: int, block_size: int, kv_heads: int = 0,
                 head_dim: int = 0, latent_dim: int = 0, itemsize: int = 2,
                 prefix: str = "model.layers", layout: str = "flash_attn",
                 names: Optional[Sequence[str]] = None):
        dtype = np.dtype(f"<u{itemsize}")
        if latent_dim:
            shape: Tuple[int, ...] = (num_blocks, block_size, latent_dim)
        elif layout == "flash_attn":
            shape = (2, num_blocks, block_size, kv_heads, head_dim)
        elif layout == "flashinfer":
            shape = (num_blocks, 2, block_size, kv_heads, head_dim)
        else:
            raise ValueError(f"layout is 'flash_attn' or 'flashinfer', not {layout!r}")
        per_layer = dtype.itemsize * int(np.prod(shape))
        per_layer = -(-per_layer // 64) * 64  # each layer's base 64-byte aligned
        self.shm = shared_memory.SharedMemory(create=True, size=per_layer * layers)
        self.names = list(names) if names is not None else [
            f"{prefix}.{layer}.self_attn.attn" for layer in range(layers)]
        self.caches: Dict[str, np.ndarray] = {}
        for layer, name in enumerate(self.names):
            self.caches[name] = np.ndarray(shape, dtype=dtype, buffer=self.shm.buf,
                                           offset=layer * per_layer)

    def close(self) -> None:
        self.caches.clear()
        self.shm.close()
        self.shm.unlink()


# -- signals ---------------------------------------------------------------------------------------

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine())
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1
_libc = ctypes.CDLL(None, use_errno=True)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def reached(value: int, target: int) -> bool:
    """``value`` has reached ``target`` on a wrapping u32 counter."""
    return ((value - target) & 0xFFFFFFFF) < 0x80000000


class Signals:
    """The signal segment the worker creates and the server maps: the forward word (the
    worker's), then one word per (event slot, layer) that the server stores once that layer of a
    swap-in is in place, waking futex waiters."""

    def __init__(self, words: int):
        self.shm = shared_memory.SharedMemory(create=True, size=signal_bytes(words))
        self.words = np.ndarray((words,), dtype=np.uint32, buffer=self.shm.buf,
                                offset=SIGNALS_OFFSET)
        self.forward = np.ndarray((1,), dtype=np.uint32, buffer=self.shm.buf,
                                  offset=FORWARD_OFFSET)
        self.words[:] = 0
        self.forward[:] = 0
        self._base = self.words.__array_interface__["data"][0]
        self._forward_addr = self.forward.__array_interface__["data"][0]

    @property
    def name(self) -> str:
        return "/" + self.shm.name.lstrip("/")

    def landed(self, word: int, record: int) -> bool:
        return reached(int(self.words[word]), record)

    def wait(self, word: int, record: int, timeout_s: float = 60.0) -> None:
        """Until the word reaches ``record``: futex waits on the shared word (polling where the
        platform's futex is unknown). Raises TimeoutError past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        addr = ctypes.c_void_p(self._base + 4 * word)
        while True:
            seen = int(self.words[word])
            if reached(seen, record):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"signal word {word} stayed at {seen}, below {record}")
            slice_s = min(left, 0.05)
            if _SYS_FUTEX is None:
                time.sleep(min(slice_s, 0.0002))
                continue
            ts = _Timespec(int(slice_s), int((slice_s % 1) * 1e9))
            _libc.syscall(_SYS_FUTEX, addr, _FUTEX_WAIT, ctypes.c_uint32(seen), ctypes.byref(ts),
                          None, 0)

    def set_forward(self, step: int) -> None:
        """The engine's forward of ``step`` has written its KV: saves may read it."""
        value = step & 0xFFFFFFFF
        if reached(int(self.forward[0]), value):
            return  # never back: a read fenced at a later step would wait for nothing
        self.forward[0] = value
        if _SYS_FUTEX is not None:  # kvtier's reads wait on the word: wake them now
            _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(self._forward_addr), _FUTEX_WAKE,
                          ctypes.c_int(0x7FFFFFFF), None, None, 0)

    def close(self) -> None:
        del self.words, self.forward
        self.shm.close()
        self.shm.unlink()

