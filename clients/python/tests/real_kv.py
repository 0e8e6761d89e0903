"""Real KV bytes for the data path's checks: what a model's forward would write for a token, as a
function of the token's whole prefix (attention's KV is causal), the layer and the half (K, V,
or MLA's one latent), and a checker that compares every loaded block with it.

A token's KV is ``elements`` unsigned integers of ``itemsize`` bytes drawn from a 64-bit seed
of (its prefix, layer, half); a block's expected bytes follow from its request's tokens alone,
whoever computed or loaded them. Used by test_real_data_path.py (CPU shared memory, in CI) and
tools/gpu-check-connector (CUDA IPC, on a GPU host).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from vllm_harness import REMOTE, Checker, Engine

M64 = (1 << 64) - 1
_MIX = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)


def prefix_seeds(tokens: Sequence[int]) -> np.ndarray:
    """seed[t]: a 64-bit hash of tokens[:t + 1] (a rolling hash, so every prefix differs)."""
    out = np.empty(len(tokens), dtype=np.uint64)
    h = 0x243F6A8885A308D3
    for i, tok in enumerate(tokens):
        h = ((h ^ (tok & M64)) * 0x100000001B3 + 0x9E3779B97F4A7C15) & M64
        h ^= h >> 29
        out[i] = h
    return out


def token_kv(seeds: np.ndarray, layer: int, half: int, elements: int, itemsize: int
             ) -> np.ndarray:
    """[len(seeds), elements] KV values of the tokens with these prefix seeds."""
    with np.errstate(over="ignore"):
        s = seeds.astype(np.uint64) ^ np.uint64(((layer + 1) * 0x51ED27 + half * 0x7F4A7C15)
                                                & M64)
        j = np.arange(elements, dtype=np.uint64)
        x = s[:, None] * _MUL + j[None, :] * _MIX
        x ^= x >> np.uint64(31)
        x *= _MUL
        x ^= x >> np.uint64(29)
    return x.astype(np.dtype(f"<u{itemsize}"))


class Layout:
    """How a layer's tensor is indexed: FlashAttention ``[2, nb, bs, h, d]``, FlashInfer
    ``[nb, 2, bs, h, d]``, MLA ``[nb, bs, latent]``."""

    def __init__(self, kind: str, cache: np.ndarray):
        self.kind = kind
        s = cache.shape
        self.halves = 1 if kind == "mla" else 2
        self.block_size = s[1] if kind == "mla" else s[2]
        self.elements = s[2] if kind == "mla" else s[3] * s[4]
        self.itemsize = cache.dtype.itemsize

    def index(self, block: int, half: int) -> Tuple[int, ...]:
        """The index of the chunk (block, half) in the tensor."""
        if self.kind == "mla":
            return (block,)
        return (half, block) if self.kind == "flash_attn" else (block, half)

    def write(self, cache: Any, block: int, slot: int, half: int, values: np.ndarray) -> None:
        """Token ``slot`` of (block, half) (a GPU tensor: into its mirror, flushed later)."""
        index = self.index(block, half)
        target = cache.mirror if isinstance(cache, DeviceKv) else cache
        chunk = target[index]
        chunk[slot] = values.reshape(chunk.shape[1:])
        if isinstance(cache, DeviceKv):
            cache.dirty.add(index)

    def corrupt(self, cache: Any, block: int) -> None:
        """Flips a bit of the block's first element."""
        index = self.index(block, 0)
        target = cache.mirror if isinstance(cache, DeviceKv) else cache
        target[index].reshape(-1)[0] ^= 1
        if isinstance(cache, DeviceKv):
            cache.dirty.add(index)

    def block(self, cache: Any, block: int, half: int) -> np.ndarray:
        """[block_size, elements] of (block, half), as the tensor holds it now."""
        index = self.index(block, half)
        if isinstance(cache, DeviceKv):
            b = cache.read(index, cache.mirror[index].shape)
        else:
            b = cache[index]
        return b.reshape(self.block_size, self.elements)


class RealKvEngine(Engine):
    """The harness's engine whose forward writes real KV (``token_kv``) into tensors of a given
    layout; ``corrupt``: (request id, block position, layer) whose KV the forward writes wrong
    in one element (a save that is not the KV of its block)."""

    def __init__(self, *args: Any, kind: str = "flash_attn", **kwargs: Any):
        super().__init__(*args, **kwargs)
        first = next(iter(self.caches.values()))
        self.layout = Layout(kind, first)
        self.seeds: Dict[str, np.ndarray] = {}
        self.corrupt: Optional[Tuple[str, int, int]] = None
        self.corrupted_keys: List[tuple] = []

    def seeds_of(self, r: Any) -> np.ndarray:
        s = self.seeds.get(r.request_id)
        if s is None or len(s) < r.num_tokens:
            s = self.seeds[r.request_id] = prefix_seeds(r.all_token_ids)
        return s

    def _compute_layer(self, out: Any, layer: int, name: str) -> None:
        cache, lay = self.caches[name], self.layout
        for rid, n in out.num_scheduled_tokens.items():
            r = self.requests[rid]
            (ids,) = self.kv.get_block_ids(rid)
            seeds = self.seeds_of(r)
            lo, hi = r.num_computed_tokens - n, r.num_computed_tokens
            for half in range(lay.halves):
                values = token_kv(seeds[lo:hi], layer, half, lay.elements, lay.itemsize)
                for pos in range(lo, hi):
                    lay.write(cache, ids[pos // self.bs], pos % self.bs, half, values[pos - lo])
            for pos in range(lo, hi):
                self.block_keys[ids[pos // self.bs]] = self.kv.key(r, pos // self.bs)
            if self.corrupt and self.corrupt[0] == rid and self.corrupt[2] == layer:
                i = self.corrupt[1]
                if lo <= i * self.bs < hi:
                    lay.corrupt(cache, ids[i])
                    self.corrupted_keys.append(self.kv.key(r, i))
        if isinstance(cache, DeviceKv):
            cache.flush(lambda mirror, index: mirror[index])


class BytesChecker(Checker):
    """The harness's contract checks, and every loaded block compared byte for byte with the KV
    of its content: a synchronous load once the forward that waited for it is done, an
    asynchronous one once vLLM is told it landed (``finished_recving``)."""

    def __init__(self, spy: Any):
        super().__init__(spy)
        self.blocks = 0
        self.bytes = 0
        self.mismatches: List[str] = []
        self.load_errors = 0  # blocks offered, not loaded: vLLM computes them itself
        self._pending: Dict[str, List[Tuple[int, int]]] = {}
        self._async_now: set = set()

    def after_execute(self, e: "Engine", out: Any, output: Any) -> None:
        self._async_now = set(out.kv_connector_metadata.async_loads)
        self.load_errors += len(output.invalid_block_ids or ())
        super().after_execute(e, out, output)  # calls check_block for every load
        self._async_now = set()
        for rid in list(self._pending):
            r = e.requests.get(rid)
            if r is None or r.status != REMOTE:
                del self._pending[rid]  # aborted: vLLM freed its blocks
            elif rid in (output.finished_recving or ()):
                for b, position in self._pending.pop(rid):
                    self._compare(e, rid, b, position)

    def check_block(self, e: "Engine", rid: str, block: int, position: int) -> None:
        if rid in self._async_now:
            self._pending.setdefault(rid, []).append((block, position))
        else:
            self._compare(e, rid, block, position)

    def _compare(self, e: "Engine", rid: str, block: int, position: int) -> None:
        r = e.requests[rid]
        lay = e.layout
        seeds = e.seeds_of(r)[position * e.bs:(position + 1) * e.bs]
        for layer, name in enumerate(e.layer_names):
            for half in range(lay.halves):
                got = lay.block(e.caches[name], block, half)
                want = token_kv(seeds, layer, half, lay.elements, lay.itemsize)
                self.bytes += got.nbytes
                if not np.array_equal(got, want):
                    bad = np.argwhere(got != want)[0]
                    self.mismatches.append(
                        f"{rid}: block {block} (position {position}) layer {layer} half {half}: "
                        f"token {bad[0]} element {bad[1]} holds {int(got[tuple(bad)])}, the KV "
                        f"of its content is {int(want[tuple(bad)])}")
        self.blocks += 1


# -- KV tensors on a GPU (tools/gpu-check-connector) -----------------------------------------------

class DeviceKv:
    """One layer's KV tensor on the GPU (the driver API, no torch), exported to kvtier through
    ``__cuda_array_interface__``. The forward writes tokens into a host mirror and copies the
    chunks it wrote to the device after each layer (``flush``); reads come from the device."""

    def __init__(self, shape: Tuple[int, ...], itemsize: int):
        from kvtier_client import cuda_driver
        self._cuda = cuda_driver
        self.shape = shape
        self.dtype = np.dtype(f"<u{itemsize}")
        self.array = cuda_driver.DeviceArray(shape, itemsize)
        self.mirror = np.zeros(shape, dtype=self.dtype)
        self.dirty: set = set()
        cuda_driver.copy_to_device(self.array.ptr, self.mirror, self.mirror.nbytes)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return self.array.__cuda_array_interface__

    def _offset(self, index: Tuple[int, ...]) -> int:
        strides = self.mirror.strides
        return sum(i * s for i, s in zip(index, strides))

    def flush(self, chunk_of: Any) -> None:
        """Copies the chunks written since the last flush (``chunk_of(index)``: the mirror's
        chunk at that index)."""
        for index in self.dirty:
            part = np.ascontiguousarray(chunk_of(self.mirror, index))
            self._cuda.copy_to_device(self.array.ptr + self._offset(index), part, part.nbytes)
        self.dirty.clear()

    def read(self, index: Tuple[int, ...], shape: Tuple[int, ...]) -> np.ndarray:
        out = np.empty(shape, dtype=self.dtype)
        self._cuda.copy_from_device(out, self.array.ptr + self._offset(index), out.nbytes)
        return out

    def free(self) -> None:
        self.array.free()


# -- one run: vLLM's stand-in and its worker over the real data path, against kvtier serve -----

BS = 16


def model_of(kind: str, layers: int) -> Dict[str, Any]:
    """A small model kvtier serve and the stand-in share: K and V of 2 heads x 8 (512-byte
    chunks), or MLA's 32-element latent (1024-byte chunks), bf16."""
    if kind == "mla":
        return {"name": "llama3-8b", "layers": layers, "kv_heads": 1, "head_dim": 32,
                "kv_dtype": "bf16", "latent_dim": 32}
    return {"name": "llama3-8b", "layers": layers, "kv_heads": 2, "head_dim": 8,
            "kv_dtype": "bf16"}


def server_args(model: Dict[str, Any], device_blocks: int, host_blocks: int,
                backend: str, storage: Sequence[str]) -> List[str]:
    args = ["--backend", backend]
    sets = {"model.layers": model["layers"], "model.kv_heads": model["kv_heads"],
            "model.head_dim": model["head_dim"], "model.attention_heads": 8,
            "model.kv_dtype": model["kv_dtype"], "cache.block_size": BS,
            "cache.device_tokens": device_blocks * BS, "cache.host_tokens": host_blocks * BS,
            "cache.write_policy": "write_through", "cache.storage_write": "always",
            "storage.capacity_tokens": 10_000_000}
    if model.get("latent_dim"):
        sets["model.kv_lora_rank"] = model["latent_dim"] - 8
        sets["model.rope_head_dim"] = 8
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    for kv in storage:
        args += ["--set", kv]
    return args


def vllm_config(extra: Dict[str, Any], model: Dict[str, Any], device_blocks: int) -> Any:
    from types import SimpleNamespace
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(kv_connector="KvtierConnector",
                                           kv_connector_module_path="kvtier_client.vllm_connector",
                                           kv_role="kv_both", kv_connector_extra_config=extra),
        cache_config=SimpleNamespace(block_size=BS, enable_prefix_caching=True,
                                     num_gpu_blocks=device_blocks, cache_dtype="auto"),
        model_config=SimpleNamespace(get_num_layers=lambda parallel: model["layers"],
                                     get_num_kv_heads=lambda parallel: model["kv_heads"],
                                     get_head_size=lambda: model["head_dim"], dtype="bfloat16"),
        parallel_config=SimpleNamespace())


def make_caches(kind: str, memory: str, model: Dict[str, Any], device_blocks: int
                ) -> Tuple[Dict[str, Any], Any]:
    """vLLM's per-layer KV tensors of ``kind`` in ``memory`` ("shm" or "cuda"), and what frees
    them."""
    names = [f"model.layers.{i}.self_attn" for i in range(model["layers"])]
    latent = int(model.get("latent_dim", 0))
    if memory == "shm":
        from kvtier_client.kv_memory import ShmKvCaches
        shm = ShmKvCaches(model["layers"], device_blocks, BS, model["kv_heads"],
                          model["head_dim"], latent, 2, layout=kind if not latent else
                          "flash_attn", names=names)
        return shm.caches, shm.close
    from kvtier_client import cuda_driver
    cuda_driver.use_device(0)
    if latent:
        shape: Tuple[int, ...] = (device_blocks, BS, latent)
    elif kind == "flash_attn":
        shape = (2, device_blocks, BS, model["kv_heads"], model["head_dim"])
    else:
        shape = (device_blocks, 2, BS, model["kv_heads"], model["head_dim"])
    caches = {n: DeviceKv(shape, 2) for n in names}
    return caches, lambda: [c.free() for c in caches.values()]


def run_check(kind: str = "flash_attn", memory: str = "shm", gen: Any = None,
              min_blocks: int = 10_000, prompt_blocks: int = 40, prompts: int = 40,
              layers: int = 4, device_blocks: int = 256, host_blocks: int = 1200,
              batch: int = 4, storage: Sequence[str] = ("storage.backend=memory",),
              corrupt: bool = False, max_rounds: int = 40, log: Any = None,
              evict_offered: bool = False) -> Dict[str, Any]:
    """Serves ``prompts`` prompts of ``prompt_blocks`` blocks, then again in alternating order
    until ``min_blocks`` blocks were loaded from kvtier's host and storage tiers into vLLM's
    tensors and checked byte for byte. ``evict_offered``: storage loads start as soon as vLLM
    allocates (as another engine's would), evicting host copies a synchronous hit of the same
    step was offered, so that those hits come back as load errors. Returns the figures."""
    import time
    from serve_fixture import KVTIER, Server
    from vllm_harness import CURRENT, Request, Spy
    from kvtier_client.vllm_base import KVConnectorRole
    from kvtier_client.vllm_connector import KvtierConnector
    gen = gen or CURRENT
    model = model_of("mla" if kind == "mla" else "kv", layers)
    backend = "shm" if memory == "shm" else "cuda"
    server = Server(*server_args(model, device_blocks, host_blocks, backend, storage))
    caches, free = make_caches(kind, memory, model, device_blocks)
    sched = worker = None
    t0 = time.monotonic()
    try:
        extra = {"kvtier.endpoint": server.endpoint, "kvtier.model": model,
                 "kvtier.data_path": "real", "kvtier.require_real": True,
                 "kvtier.host_waits": memory == "cuda"}
        cfg = vllm_config(extra, model, device_blocks)
        kvc = SimpleKvCacheConfig(device_blocks)
        # vLLM's workers register their KV caches before its scheduler (and its connector)
        # exists: the worker's attach comes before the scheduler's hello.
        worker = KvtierConnector(cfg, KVConnectorRole.WORKER, kvc)
        worker.register_kv_caches(caches)
        sched = KvtierConnector(cfg, KVConnectorRole.SCHEDULER, kvc)
        if evict_offered:
            evict_between_lookup_and_admission(sched)
        checker = BytesChecker(Spy(sched._client))
        e = RealKvEngine(gen, sched, worker, device_blocks, BS, layers=layers, checker=checker,
                         caches=caches, kind=kind)
        waits: Dict[int, List[int]] = {}
        base = int(time.time() * 1000) % 10000 * 100000  # token ids stay below 2^31
        texts = [list(range(base + i * 10000, base + i * 10000 + prompt_blocks * BS + 3))
                 for i in range(prompts)]
        n = 0
        rounds = 0

        def serve(order: Sequence[int]) -> None:
            nonlocal n
            for at in range(0, len(order), batch):
                for i in order[at:at + batch]:
                    n += 1
                    e.add(Request(f"r{n}", texts[i]))
                    if corrupt and n == 1:
                        e.corrupt = ("r1", 2, min(1, layers - 1))
                for _ in range(2000):
                    if not e.has_work():
                        break
                    e.step()
                    for layer, ns in worker.data_path.layer_waits_ns:
                        waits.setdefault(layer, []).append(ns)
                else:
                    raise AssertionError("the engine never finished its requests")
        serve(range(prompts))  # computes and saves every prompt
        while checker.blocks < min_blocks and rounds < max_rounds:
            rounds += 1
            order = list(range(prompts))
            serve(order[::-1] if rounds % 2 else order)
            if log:
                print(f"  round {rounds}: {checker.blocks} blocks checked, "
                      f"{len(checker.mismatches)} mismatches", file=log, flush=True)
        stats = sched._client.stats()
        version = server.lines[0].strip() if server.lines else ""
    finally:
        for c in (sched, worker):
            if c is not None:
                c.shutdown()
        code = server.stop()
        free()
    import subprocess
    build = subprocess.run([KVTIER, "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "kvtier": build, "layout": kind, "memory": memory, "generation": gen.name,
        "layers": layers, "block_size": BS, "block_bytes": checker.bytes // max(checker.blocks, 1),
        "blocks_checked": checker.blocks, "bytes_checked": checker.bytes,
        "mismatches": len(checker.mismatches), "first_mismatches": checker.mismatches[:5],
        "load_error_blocks": checker.load_errors,
        "loads_checked_by_contract": checker.checked_loads, "rounds": rounds,
        "requests": n, "steps": e.steps, "seconds": round(time.monotonic() - t0, 2),
        "layer_wait_us": {str(l): {"n": len(v), "mean": round(sum(v) / len(v) / 1e3, 1),
                                   "max": round(max(v) / 1e3, 1)}
                          for l, v in sorted(waits.items())},
        "server_exit": code, "server_first_line": version,
        "controller": {k: stats.get("controller", {}).get(k) for k in
                       ("copies_in_flight",)},
        "corrupted_blocks": len(e.corrupted_keys),
    }


def evict_between_lookup_and_admission(connector: Any) -> None:
    """Registers asynchronous loads when vLLM allocates, before the step's admissions: their
    storage loads take host blocks first (what the connector did before it waited for the
    step)."""
    after_alloc = connector.update_state_after_alloc

    def early(request: Any, blocks: Any, num_external_tokens: int) -> None:
        after_alloc(request, blocks, num_external_tokens)
        r = connector._reqs.get(request.request_id)
        if r is not None and r.waiting_load and not r.registered:
            connector._ensure_ready(r)
    connector.update_state_after_alloc = early


# kvtier's write policy and tiers around the check (40 prompts of 40 blocks: 1,600 blocks).
SETTINGS = {
    "host_hits": ("storage.backend=memory", f"cache.host_tokens={2000 * BS}"),
    "write_back": ("storage.backend=memory", "cache.write_policy=write_back"),
    "write_through_evicting": ("storage.backend=memory",),
    "on_host_evict": ("storage.backend=memory", "cache.storage_write=on_host_evict"),
}


class SimpleKvCacheConfig:
    """vLLM's KVCacheConfig as the connector reads it: one group, the pool's size."""

    def __init__(self, num_blocks: int):
        self.num_blocks = num_blocks
        self.kv_cache_groups = [object()]


def main() -> int:
    import argparse
    import json
    import os
    import sys
    from vllm_harness import GENERATIONS
    p = argparse.ArgumentParser(description="The connector's real data path, checked byte for "
                                "byte (clients/python/tests/real_kv.py)")
    p.add_argument("--memory", choices=["shm", "cuda"], default="shm")
    p.add_argument("--layout", choices=["flash_attn", "flashinfer", "mla"], default="flash_attn")
    p.add_argument("--generation", choices=[g.name for g in GENERATIONS], default="main")
    p.add_argument("--min-blocks", type=int, default=10_000)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--setting", choices=sorted(SETTINGS), default="host_hits",
                   help="host_hits: write-through, a host tier holding every prompt; write_back: "
                   "a smaller host tier, storage loads; write_through_evicting: write-through, a smaller host "
                   "tier; on_host_evict: the same, host "
                   "evictions written to storage")
    p.add_argument("--evict-offered", action="store_true",
                   help="start storage loads before the step's admissions, evicting host copies "
                   "offered to synchronous hits: they come back as load errors")
    p.add_argument("--corrupt", action="store_true",
                   help="corrupt one saved block: the run must report a mismatch")
    p.add_argument("--out", help="write the figures here (JSON)")
    a = p.parse_args()
    gen = next(g for g in GENERATIONS if g.name == a.generation)
    figures = run_check(a.layout, a.memory, gen, a.min_blocks, layers=a.layers,
                        storage=SETTINGS[a.setting], corrupt=a.corrupt, log=sys.stderr,
                        evict_offered=a.evict_offered)
    figures["setting"] = a.setting
    text = json.dumps(figures, indent=2)
    print(text)
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, a.out)
    ok = figures["blocks_checked"] >= a.min_blocks and figures["server_exit"] == 0
    ok = ok and (figures["mismatches"] > 0 if a.corrupt else figures["mismatches"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
