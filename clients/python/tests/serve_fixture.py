"""Starts ``kvtier serve`` on free loopback ports for a test and stops it (SIGTERM, exit 0)."""

import ctypes
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

KVTIER = os.environ.get("KVTIER_BINARY", "kvtier")

_ENDPOINT = re.compile(r"(tcp://127\.0\.0\.1:\d+)")
_HTTP = re.compile(r"http://127\.0\.0\.1:(\d+)/metrics")


def _die_with_parent():
    # The server must not outlive a test that crashed: SIGKILL when the parent dies.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Server:
    """``kvtier serve`` with ``args``; ``endpoint`` (protocol), ``events``, ``replay`` and
    ``metrics_port`` are read from what it prints once ready."""

    def __init__(self, *args, events=False, metrics=False, timeout_s=60):
        cmd = [KVTIER, "serve", "--bind", "tcp://127.0.0.1:*"]
        if events:  # True, or the (events, replay) endpoints to bind
            pub, replay = events if isinstance(events, tuple) else ("tcp://127.0.0.1:*",) * 2
            cmd += ["--events", pub, "--events-replay", replay]
        if metrics:
            cmd += ["--metrics-port", "0"]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, preexec_fn=_die_with_parent)
        self.lines = []
        self.endpoint = self.events = self.replay = None
        self.metrics_port = None
        # Its output is read by a thread from the start: a server that prints nothing makes the
        # wait below time out (naming what it printed) instead of blocking a readline for ever.
        self._starting = queue.Queue()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        want_events, want_metrics = events, metrics
        while True:
            try:
                line = self._starting.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if "listening" in line and self.endpoint is None:
                m = _ENDPOINT.search(line)
                self.endpoint = m.group(1) if m else None
            elif "events on" in line:
                eps = _ENDPOINT.findall(line)
                self.events = eps[0]
                self.replay = eps[1] if len(eps) > 1 else None
                want_events = False
            elif "metrics on" in line:
                self.metrics_port = int(_HTTP.search(line).group(1))
                want_metrics = False
            if self.endpoint and not want_events and not want_metrics:
                break
        self._starting = None  # from now on its lines are only kept
        if self.endpoint is None or want_events or want_metrics:
            self.proc.kill()
            self.proc.wait()
            self._reader.join(5)
            raise RuntimeError(f"kvtier serve did not start within {timeout_s} s:\n"
                               + "".join(self.lines))

    def _drain(self):
        # Keeps reading its output so that it never blocks on a full pipe.
        for line in self.proc.stdout:
            self.lines.append(line)
            starting = self._starting
            if starting is not None:
                starting.put(line)
        starting = self._starting
        if starting is not None:
            starting.put(None)

    def stop(self, timeout_s=30):
        """SIGTERM; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self._reader.join(5)
        self.proc.stdout.close()
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.stop()
