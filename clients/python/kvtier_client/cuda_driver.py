"""The few CUDA driver API calls the vLLM worker's real mode needs, through ``ctypes``: no torch,
no CUDA toolkit, only the driver's ``libcuda.so.1`` (docs/vllm.md, "The data path").

The worker exports its KV tensors to ``kvtier serve --backend cuda`` (``cuIpcGetMemHandle`` of
each tensor's allocation, with its offset in it), creates the interprocess events the server
records behind each layer of a swap-in, and makes its stream wait on them. ``DeviceArray`` is a
block of device memory with ``__cuda_array_interface__``: a KV tensor for engines and tests
without torch; torch's and CuPy's CUDA tensors expose the same interface.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence, Tuple

CU_EVENT_DISABLE_TIMING = 0x2
CU_EVENT_INTERPROCESS = 0x4
CUDA_ERROR_NOT_READY = 600
IPC_HANDLE_BYTES = 64


class CudaError(RuntimeError):
    pass


class _IpcHandle(ctypes.Structure):
    # Unsigned bytes, not c_char: ctypes reads a c_char array field as a string cut at its first
    # NUL, and an IPC handle holds NULs (the H200 run gave 4 of 64 bytes).
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


_lib: Optional[ctypes.CDLL] = None


def driver() -> ctypes.CDLL:
    """libcuda.so.1, initialised once; CudaError where there is none."""
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaError(f"no CUDA driver (libcuda.so.1): {e}") from e
        _check(lib, lib.cuInit(0), "cuInit")
        _lib = lib
    return _lib


def _check(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code == 0:
        return
    text = ctypes.c_char_p()
    lib.cuGetErrorString(code, ctypes.byref(text))
    name = text.value.decode() if text.value else "unknown error"
    raise CudaError(f"{what} failed: {name} ({code})")


def call(name: str, *args: Any) -> None:
    lib = driver()
    _check(lib, getattr(lib, name)(*args), name)


def use_device(ordinal: int = 0) -> int:
    """Makes the device's primary context current on this thread (the one torch uses); returns
    the context."""
    dev = ctypes.c_int()
    call("cuDeviceGet", ctypes.byref(dev), ordinal)
    ctx = ctypes.c_void_p()
    call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    call("cuCtxSetCurrent", ctx)
    return ctx.value or 0


def allocation_of(ptr: int) -> Tuple[int, int]:
    """(base, bytes) of the allocation holding device address ``ptr``."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr))
    return base.value, size.value


def ipc_mem_handle(base: int) -> bytes:
    h = _IpcHandle()
    call("cuIpcGetMemHandle", ctypes.byref(h), ctypes.c_uint64(base))
    return bytes(h.reserved)


def ipc_event() -> Tuple[int, bytes]:
    """An interprocess event (no timing) and its handle."""
    ev = ctypes.c_void_p()
    call("cuEventCreate", ctypes.byref(ev), CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)
    h = _IpcHandle()
    call("cuIpcGetEventHandle", ctypes.byref(h), ev)
    return ev.value or 0, bytes(h.reserved)


def stream_wait_event(stream: int, event: int) -> None:
    call("cuStreamWaitEvent", ctypes.c_void_p(stream), ctypes.c_void_p(event), 0)


def event_synchronize(event: int) -> None:
    call("cuEventSynchronize", ctypes.c_void_p(event))


def event_done(event: int) -> bool:
    lib = driver()
    code = lib.cuEventQuery(ctypes.c_void_p(event))
    if code == CUDA_ERROR_NOT_READY:
        return False
    _check(lib, code, "cuEventQuery")
    return True


def event_destroy(event: int) -> None:
    call("cuEventDestroy_v2", ctypes.c_void_p(event))


def stream_create() -> int:
    s = ctypes.c_void_p()
    call("cuStreamCreate", ctypes.byref(s), 0)
    return s.value or 0


def stream_synchronize(stream: int) -> None:
    call("cuStreamSynchronize", ctypes.c_void_p(stream))


def mem_alloc(nbytes: int) -> int:
    p = ctypes.c_uint64()
    call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(nbytes))
    return p.value


def mem_free(ptr: int) -> None:
    call("cuMemFree_v2", ctypes.c_uint64(ptr))


def copy_to_device(dst: int, src: Any, nbytes: int) -> None:
    """``src``: a writable or read-only buffer of at least ``nbytes`` (a numpy array)."""
    address = src.__array_interface__["data"][0] if hasattr(src, "__array_interface__") else src
    call("cuMemcpyHtoD_v2", ctypes.c_uint64(dst), ctypes.c_void_p(address), ctypes.c_size_t(nbytes))


def copy_from_device(dst: Any, src: int, nbytes: int) -> None:
    address = dst.__array_interface__["data"][0] if hasattr(dst, "__array_interface__") else dst
    call("cuMemcpyDtoH_v2", ctypes.c_void_p(address), ctypes.c_uint64(src), ctypes.c_size_t(nbytes))


class DeviceArray:
    """Device memory of a C-contiguous ``shape`` of ``itemsize``-byte elements, seen through
    ``__cuda_array_interface__`` (version 3) like torch's CUDA tensors; freed with ``free``."""

    def __init__(self, shape: Sequence[int], itemsize: int = 2, ptr: Optional[int] = None,
                 strides: Optional[Sequence[int]] = None):
        self.shape = tuple(int(x) for x in shape)
        self.itemsize = itemsize
        self.nbytes = itemsize
        for x in self.shape:
            self.nbytes *= x
        self.owned = ptr is None
        self.ptr = mem_alloc(self.nbytes) if ptr is None else ptr
        self.strides = tuple(strides) if strides is not None else None

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {"shape": self.shape, "typestr": f"<u{self.itemsize}",
                "data": (self.ptr, False), "version": 3, "strides": self.strides}

    def free(self) -> None:
        if self.owned and self.ptr:
            mem_free(self.ptr)
            self.ptr = 0
