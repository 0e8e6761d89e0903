"""ZeroMQ for the client: pyzmq where it is installed (Debian: python3-zmq), else the few calls
the client makes, over libzmq itself through ``ctypes``: a Python without pyzmq (a GPU host's,
docs/vllm.md) still speaks to kvtier serve, given libzmq.so.5 on its library path (the GPU
bundle carries the one kvtier links).

``zmq`` below is the pyzmq module or a stand-in of the same names: ``Context.instance()``,
``socket(DEALER | SUB)``, ``setsockopt(LINGER | SUBSCRIBE)``, ``connect``, ``send_multipart``,
``recv_multipart``, ``poll``, ``close``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Any, List, Optional

try:
    import zmq  # type: ignore
except ImportError:  # pragma: no cover - exercised where pyzmq is absent
    zmq = None


class _ZmqError(OSError):
    pass


class _Socket:
    def __init__(self, lib: ctypes.CDLL, handle: int):
        self._lib = lib
        self._h = ctypes.c_void_p(handle)

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            err = self._lib.zmq_errno()
            raise _ZmqError(err, f"{what}: {self._lib.zmq_strerror(err).decode()}")
        return rc

    def setsockopt(self, option: int, value: Any) -> None:
        if isinstance(value, bytes):
            buf = ctypes.create_string_buffer(value, len(value))
            self._check(self._lib.zmq_setsockopt(self._h, option, buf, len(value)), "setsockopt")
        else:
            v = ctypes.c_int(int(value))
            self._check(self._lib.zmq_setsockopt(self._h, option, ctypes.byref(v),
                                                 ctypes.sizeof(v)), "setsockopt")

    def connect(self, endpoint: str) -> None:
        self._check(self._lib.zmq_connect(self._h, endpoint.encode()), f"connect {endpoint}")

    def send_multipart(self, frames: List[bytes]) -> None:
        for i, f in enumerate(frames):
            more = 2 if i + 1 < len(frames) else 0  # ZMQ_SNDMORE
            self._check(self._lib.zmq_send(self._h, f, len(f), more), "send")

    def poll(self, timeout_ms: Optional[int] = None) -> int:
        item = _PollItem(self._h, 0, 1, 0)  # ZMQ_POLLIN
        timeout = -1 if timeout_ms is None else int(timeout_ms)
        rc = self._check(self._lib.zmq_poll(ctypes.byref(item), 1, timeout), "poll")
        return 1 if rc > 0 and item.revents & 1 else 0

    def recv_multipart(self) -> List[bytes]:
        frames = []
        while True:
            msg = (ctypes.c_ubyte * 64)()
            self._lib.zmq_msg_init(msg)
            try:
                self._check(self._lib.zmq_msg_recv(msg, self._h, 0), "recv")
                size = self._lib.zmq_msg_size(msg)
                data = self._lib.zmq_msg_data(msg)
                frames.append(ctypes.string_at(data, size))
                more = self._lib.zmq_msg_more(msg)
            finally:
                self._lib.zmq_msg_close(msg)
            if not more:
                return frames

    def close(self, linger: Optional[int] = None) -> None:
        if self._h:
            if linger is not None:
                self.setsockopt(17, linger)  # ZMQ_LINGER
            self._lib.zmq_close(self._h)
            self._h = ctypes.c_void_p(None)


class _PollItem(ctypes.Structure):
    _fields_ = [("socket", ctypes.c_void_p), ("fd", ctypes.c_int), ("events", ctypes.c_short),
                ("revents", ctypes.c_short)]


class _Context:
    _instance: Optional["_Context"] = None
    _lock = threading.Lock()

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        self._h = ctypes.c_void_p(lib.zmq_ctx_new())

    @classmethod
    def instance(cls) -> "_Context":
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls(_load())
            return cls._instance

    def socket(self, kind: int) -> _Socket:
        h = self._lib.zmq_socket(self._h, kind)
        if not h:
            raise _ZmqError(self._lib.zmq_errno(), "zmq_socket failed")
        return _Socket(self._lib, h)


def _load() -> ctypes.CDLL:
    names = [os.environ.get("KVTIER_LIBZMQ", ""), "libzmq.so.5", ctypes.util.find_library("zmq")]
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.zmq_ctx_new.restype = ctypes.c_void_p
        lib.zmq_socket.restype = ctypes.c_void_p
        lib.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.zmq_strerror.restype = ctypes.c_char_p
        lib.zmq_msg_data.restype = ctypes.c_void_p
        lib.zmq_msg_size.restype = ctypes.c_size_t
        lib.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        lib.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.zmq_close.argtypes = [ctypes.c_void_p]
        lib.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                       ctypes.c_size_t]
        lib.zmq_msg_recv.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        lib.zmq_poll.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long]
        return lib
    raise ImportError("neither pyzmq nor libzmq.so.5 is available (set KVTIER_LIBZMQ to "
                      "libzmq's path)")


class _ZmqModule:
    """The names of pyzmq the client uses."""
    DEALER = 5
    SUB = 2
    LINGER = 17
    SNDTIMEO = 28
    SUBSCRIBE = 6
    Context = _Context
    Socket = _Socket
    ZMQError = _ZmqError


if zmq is None:
    zmq = _ZmqModule()  # type: ignore[assignment]

__all__ = ["zmq"]
