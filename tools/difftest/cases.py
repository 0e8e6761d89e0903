"""Random small replay cases: native traces and configs drawn from a seed.

A case is plain data (JSON-able): the config keys it sets (flat `key: value`, applied with
`--set` over configs/default.json) and one or more native traces (docs/traces.md, "Native kvtier
JSONL"), each a header and request lines. The same seed always gives the same case, so a case
is named by its seed; a shrunk case (tools/difftest/shrink.py) is written out whole.

What is drawn (docs/design.md, "Hit ratio", "Write policies", "Storage writes"):
  - tier sizes in blocks: a device of 1 to 24 blocks, a host of 0 or 1 to 32 blocks in any
    order against the device (smaller, equal, larger), storage 0 or 1 to 48 blocks (storage
    needs a host tier); now and then a tier larger than the whole trace;
  - every write policy, its threshold, every storage_write mode and its threshold, both
    write_back host copy modes, LRU and LFU, and now and then prefix caching off;
  - cache block sizes of 1 to 16 tokens; trace blocks that split into several cache blocks or
    merge from several; token-id and trace-id identity (file-local and global id spaces), lines
    with no identity, partial last blocks;
  - prompts drawn from a few shared documents (so prefixes are shared, diverge and repeat),
    sessions with think times, arrivals that tie within a file and across files.
"""

import random

POLICIES = ["write_through", "write_through_selective", "write_back"]
STORAGE_WRITES = ["always", "on_host_evict", "never", "write_through_selective"]
HOST_COPIES = ["free_on_swap_in", "keep"]
EVICTIONS = ["lru", "lfu"]

# Features a run may switch off (--without), e.g. while the reference lacks one.
FEATURES = ["lfu", "no_prefix_caching", "tokens", "ids", "no_identity", "two_files",
            "global_scope", "sessions", "token_sizes", "partial_blocks"]


def _tier_sizes(rng, features):
    device = rng.choice([rng.randint(1, 6), rng.randint(1, 12), rng.randint(4, 24)])
    order = rng.random()
    if order < 0.2:
        host = 0
    elif order < 0.45:
        host = rng.randint(1, device)          # host <= device
    elif order < 0.55:
        host = device
    else:
        host = rng.randint(device, device + 24)  # host >= device
    if rng.random() < 0.08:
        device = 10000                          # a device no trace fills
    if rng.random() < 0.05 and host > 0:
        host = 10000
    storage = 0
    if host > 0 and rng.random() < 0.65:
        storage = rng.choice([rng.randint(1, 8), rng.randint(1, 48), 10000])
    return device, host, storage


def draw_config(rng, features):
    block = rng.choice([1, 2, 4, 4, 8, 8, 16])
    device, host, storage = _tier_sizes(rng, features)
    cfg = {"cache.block_size": block}
    if "token_sizes" in features and rng.random() < 0.25:
        # sizes in tokens: a count that is no multiple of the block size rounds down
        cfg["cache.device_tokens"] = device * block + rng.randint(0, block - 1)
        cfg["cache.host_tokens"] = host * block + (rng.randint(0, block - 1) if host else 0)
        cfg["storage.capacity_tokens"] = storage * block
    else:
        cfg["cache.device_blocks"] = device
        cfg["cache.host_blocks"] = host
        cfg["storage.capacity_blocks"] = storage
    cfg["cache.write_policy"] = rng.choice(POLICIES)
    cfg["cache.write_through_threshold"] = rng.choice([1, 2, 2, 3])
    cfg["cache.storage_write"] = rng.choice(STORAGE_WRITES)
    cfg["cache.storage_write_threshold"] = rng.choice([1, 2, 2, 3])
    cfg["cache.write_back_host_copy"] = rng.choice(HOST_COPIES)
    cfg["cache.eviction"] = rng.choice(EVICTIONS) if "lfu" in features else "lru"
    if "no_prefix_caching" in features and rng.random() < 0.05:
        cfg["cache.prefix_caching"] = False
    return cfg


class _Docs:
    """A few shared documents that prompts take prefixes of, so prefixes are shared, diverge
    and repeat. Units are token ids or trace ids."""

    def __init__(self, rng, fresh):
        self.rng = rng
        self.fresh = fresh  # () -> a new unit
        self.docs = []
        self.block_size = None  # the trace block size of the files that share these documents

    def prompt(self, units):
        rng = self.rng
        if not self.docs or rng.random() < 0.2:
            self.docs.append([self.fresh() for _ in range(units + rng.randint(0, 8))])
        doc = rng.choice(self.docs)
        shared = min(len(doc), rng.randint(0, units))
        out = doc[:shared]
        while len(out) < units:
            out.append(self.fresh())
        if rng.random() < 0.3 and len(out) > len(doc):
            # the prompt's continuation becomes part of the document: later prompts share it
            doc.extend(out[len(doc):])
        return out


def _arrivals(rng, n):
    t, out = 0.0, []
    for _ in range(n):
        if rng.random() < 0.6:
            t += rng.choice([0.25, 0.5, 1.0, 2.0])
        out.append(t)  # else a tie with the previous line
    return out


def draw_trace(rng, cfg, features, file_index, shared_docs):
    """One native trace file: header and request dicts."""
    block = cfg["cache.block_size"]
    kinds = [k for k in ("tokens", "ids") if k in features] or ["ids"]
    kind = rng.choice(kinds)
    header = {"kvtier_trace": 1}
    if kind == "ids":
        ratio = rng.choice([1, 1, 2, 4, -2, -4])  # trace block = cache block x ratio (or / -ratio)
        tblock = block * ratio if ratio > 0 else block // -ratio
        if tblock < 1 or (ratio < 0 and block % -ratio):
            tblock = block
        header["block_size"] = tblock
        if "global_scope" in features and shared_docs is not None and rng.random() < 0.5:
            header["hash_scope"] = "global"
            # a global id names one trace block: files that share ids share its size
            if shared_docs.block_size is None:
                shared_docs.block_size = tblock
            header["block_size"] = shared_docs.block_size
    n = rng.randint(1, 24)
    times = _arrivals(rng, n)
    sessions = "sessions" in features and rng.random() < 0.4
    counter = [file_index * 100000 + 1]

    def fresh():
        counter[0] += 1
        return counter[0] if kind == "ids" else rng.randint(0, 50)

    docs = shared_docs if header.get("hash_scope") == "global" else _Docs(rng, fresh)
    if docs is shared_docs:
        docs.fresh = fresh
    lines = []
    seen_session = set()
    for i in range(n):
        line = {"arrival_s": times[i], "output_length": rng.randint(0, 6)}
        if kind == "ids":
            tb = header["block_size"]
            units = rng.randint(0, max(1, 48 // tb + 2))
            ids = docs.prompt(units)
            tail = rng.randint(0, tb - 1) if "partial_blocks" in features else 0
            length = units * tb + tail
            listed = ids
            if tail > 0 and rng.random() < 0.5:
                listed = ids + [fresh()]  # the partial last block is listed (ceil)
            if length == 0:
                length, listed = rng.randint(1, tb), []
                if length == tb:
                    listed = [fresh()]
            line["input_length"] = length
            if "no_identity" in features and rng.random() < 0.06:
                pass  # no prefix information: every block unique
            else:
                line["block_hashes"] = listed
        else:
            units = rng.randint(1, max(2, 6 * block + block))
            if "partial_blocks" not in features:
                units = max(block, units - units % block)
            toks = docs.prompt(units)
            line["input_length"] = len(toks)
            line["tokens"] = toks
        if sessions and rng.random() < 0.7:
            s = rng.choice(["a", "b", 7, "c"])
            line["session"] = s
            if s in seen_session and rng.random() < 0.6:
                line["think_time_s"] = rng.choice([0, 0.5, 3])
            seen_session.add(s)
        lines.append(line)
    return {"header": header, "lines": lines}


def draw_case(seed, without=()):
    """The case of `seed`: {"seed", "config": {key: value}, "traces": [trace]}."""
    features = set(FEATURES) - set(without)
    rng = random.Random(seed * 1000003 + 11)
    cfg = draw_config(rng, features)
    files = 2 if "two_files" in features and rng.random() < 0.25 else 1
    shared = _Docs(rng, None)
    traces = [draw_trace(rng, cfg, features, i, shared) for i in range(files)]
    return {"seed": seed, "config": cfg, "traces": traces}


def trace_text(trace):
    import json
    out = [json.dumps(trace["header"], separators=(",", ":"))]
    out += [json.dumps(line, separators=(",", ":")) for line in trace["lines"]]
    return "\n".join(out) + "\n"
