#!/usr/bin/python3
"""A reference model of kvtier's hit-rate replay (`kvtier replay --mode hitrate`).

Written from docs/design.md, docs/fastdeploy.md and docs/traces.md alone, to check the C++
replay against on random cases. Plain data structures, every choice a linear scan, no
optimisation: it is meant to be read. docs/design.md, "The hit-rate replay, request by
request", states the rules it follows; the steps of `Model.process` are numbered as there.

    /usr/bin/python3 tools/reference/kvtier_ref.py --config C.json --trace T.jsonl \
        [--trace T2.jsonl ...] [--set key=value ...] --out DIR

writes DIR/requests.csv (the columns of kvtier's hit-rate requests.csv, docs/outputs.md) and
DIR/summary.json. Exit 0 ok, 1 an invariant failed, 2 bad input or a config key this model
does not model (named). From Python: `config = load_config(path, sets)`,
`requests = read_traces(paths, config)`, `rows, summary = replay(requests, config)`.
"""
import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CONFIG = os.path.join(ROOT, "configs", "default.json")
MOONCAKE_BLOCK = 512

CSV_COLUMNS = ["seq", "file", "line", "arrival_s", "input_tokens", "output_tokens", "blocks",
               "device_hit_blocks", "host_hit_blocks", "storage_hit_blocks",
               "device_hit_tokens", "host_hit_tokens", "storage_hit_tokens", "uncached_blocks"]

# Keys whose value this model follows; any other key must keep its default (else exit 2).
MODELLED = {"cache." + k for k in (
    "block_size", "device_tokens", "device_blocks", "host_tokens", "host_blocks", "eviction",
    "write_policy", "write_through_threshold", "storage_write", "storage_write_threshold",
    "write_back_host_copy", "prefix_caching")} | {
    "storage.capacity_tokens", "storage.capacity_blocks", "trace.time_scale",
    "trace.max_blocks_per_request", "trace.max_line_bytes", "trace.max_document_bytes"}
# Pairs of which setting one (non-null) clears the other, as `kvtier --set` does.
PAIRS = {("cache", "device_tokens"): "device_blocks", ("cache", "device_blocks"): "device_tokens",
         ("cache", "host_tokens"): "host_blocks", ("cache", "host_blocks"): "host_tokens",
         ("storage", "capacity_tokens"): "capacity_blocks",
         ("storage", "capacity_blocks"): "capacity_tokens"}
ENUMS = {"cache.eviction": ("lru", "lfu"),
         "cache.write_policy": ("write_through", "write_through_selective", "write_back"),
         "cache.storage_write": ("always", "write_through_selective", "on_host_evict", "never"),
         "cache.write_back_host_copy": ("free_on_swap_in", "keep")}
INTS = {"cache.block_size": (1, 32768), "cache.device_tokens": (0, 10**15),
        "cache.device_blocks": (0, 2**32 - 1), "cache.host_tokens": (0, 10**15),
        "cache.host_blocks": (0, 2**32 - 1), "cache.write_through_threshold": (1, 10**9),
        "cache.storage_write_threshold": (1, 10**9), "storage.capacity_tokens": (0, 10**15),
        "storage.capacity_blocks": (0, 2**32 - 1), "trace.max_blocks_per_request": (1, 2**32 - 1)}


class RefError(Exception):
    """Bad input, or a case the reference does not model: exit 2."""


# ----------------------------------------------------------------------------------- config

def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    for k in keys:
        if keys.count(k) > 1:
            raise ValueError("key '%s' appears twice" % k)
    return dict(pairs)


def _json(text):
    def bad_constant(name):
        raise ValueError("%s is not a JSON number" % name)
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=bad_constant)


def _overlay(config, layer, where):
    if not isinstance(layer, dict):
        raise RefError("%s: a config must be a JSON object" % where)
    for section, values in layer.items():
        if section not in config or not isinstance(values, dict):
            raise RefError("%s: unknown config section '%s'" % (where, section))
        both = [k for k in values if (section, k) in PAIRS and PAIRS[(section, k)] in values
                and values[k] is not None and values[PAIRS[(section, k)]] is not None]
        if both:
            raise RefError("%s: %s.%s and its pair are both set" % (where, section, both[0]))
        for key, value in values.items():
            if key not in config[section]:
                raise RefError("%s: unknown config key '%s.%s'" % (where, section, key))
            config[section][key] = value
            if (section, key) in PAIRS and value is not None:
                config[section][PAIRS[(section, key)]] = None


def _check_values(config, defaults):
    for section in config:
        for key, value in config[section].items():
            name = "%s.%s" % (section, key)
            if name in ENUMS and value not in ENUMS[name]:
                raise RefError("%s: expected one of %s, got %r" % (name, ", ".join(ENUMS[name]), value))
            if name in INTS and value is not None:
                if isinstance(value, float) and value.is_integer():
                    value = config[section][key] = int(value)
                low, high = INTS[name]
                if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                    raise RefError("%s: expected an integer in [%d, %d], got %r" % (name, low, high, value))
            if name == "cache.prefix_caching" and not isinstance(value, bool):
                raise RefError("%s: expected true or false, got %r" % (name, value))
            if name == "trace.time_scale" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                               or not 1e-6 <= value <= 1e6):
                raise RefError("%s: expected a number in [1e-6, 1e6], got %r" % (name, value))
            if name not in MODELLED and value != defaults[section][key]:
                raise RefError("config key '%s' is not modelled by the reference (it must keep its "
                               "default, %s)" % (name, json.dumps(defaults[section][key])))


def load_config(config_path=None, sets=(), overrides=None):
    """The effective config: configs/default.json, then the file, then dict overrides, then
    each `key=value` of `sets` in order. Raises RefError naming the key it cannot take."""
    with open(DEFAULT_CONFIG) as f:
        defaults = _json(f.read())
    config = json.loads(json.dumps(defaults))
    if config_path:
        try:
            with open(config_path) as f:
                layer = _json(f.read())
        except (OSError, ValueError) as e:
            raise RefError("%s: %s" % (config_path, e))
        _overlay(config, layer, config_path)
    if overrides:
        _overlay(config, overrides, "config")
    for item in sets:
        key, eq, text = item.partition("=")
        if not eq or key.count(".") != 1:
            raise RefError("--set %s: expected section.key=value" % item)
        try:
            value = _json(text)
        except ValueError:
            value = text
        section, name = key.split(".")
        _overlay(config, {section: {name: value}}, "--set " + item)
    _check_values(config, defaults)
    return config


def _blocks(config, section, prefix, block_size):
    blocks, tokens = config[section][prefix + "_blocks"], config[section][prefix + "_tokens"]
    if blocks is not None:
        return blocks
    return (tokens or 0) // block_size


# ----------------------------------------------------------------------------------- traces

class Request:
    """One trace request (docs/traces.md, "What a reader yields"). Block identity is one of
    ids (trace ids of `trace_block_size` tokens in `id_space`), tokens, or neither."""
    __slots__ = ("path", "file", "line", "arrival_ns", "input_tokens", "output_tokens", "ids",
                 "trace_block_size", "id_space", "tokens", "session", "turn", "seq")

    def __init__(self, path, file, line, arrival_ns, input_tokens, output_tokens, ids=None,
                 trace_block_size=None, id_space=None, tokens=None, session=0, turn=0):
        self.path, self.file, self.line = path, file, line
        self.arrival_ns, self.input_tokens, self.output_tokens = arrival_ns, input_tokens, output_tokens
        self.ids, self.trace_block_size, self.id_space = ids, trace_block_size, id_space
        self.tokens, self.session, self.turn, self.seq = tokens, session, turn, None


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _field(where, name, message):
    return RefError("%s: field '%s': %s" % (where, name, message))


def _int_field(obj, where, name, low, high=2**32 - 1):
    if name not in obj:
        raise _field(where, name, "missing")
    v = obj[name]
    if not _is_int(v) or not low <= v <= high:
        raise _field(where, name, "expected an integer from %d to %d, got %s" % (low, high, json.dumps(v)))
    return v


def _id_list(obj, where, name, high):
    v = obj[name]
    if not isinstance(v, list) or not all(_is_int(x) and 0 <= x <= high for x in v):
        raise _field(where, name, "expected a list of integers from 0 to %d" % high)
    return v


def _lines(path, config):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RefError("%s: cannot open: %s" % (path, e.strerror))
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), 1):
        if len(raw) > config["trace"]["max_line_bytes"]:
            raise RefError("%s:%d: line longer than trace.max_line_bytes" % (path, number))
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if text.strip(" \t"):
            yield number, text


def _parse(path, number, text):
    try:
        obj = _json(text)
    except ValueError as e:
        raise RefError("%s:%d: malformed JSON: %s" % (path, number, e))
    if not isinstance(obj, dict):
        raise RefError("%s:%d: malformed JSON: not an object" % (path, number))
    return obj


def read_mooncake(path, file, lines, config):
    """Mooncake FAST'25 JSONL: 512-token trace blocks, the partial last one listed."""
    out, previous = [], 0
    for number, text in lines:
        obj, where = _parse(path, number, text), "%s:%d" % (path, number)
        stamp = _int_field(obj, where, "timestamp", 0, 2**62)
        if stamp < previous:
            raise _field(where, "timestamp", "%d is earlier than the previous line's %d" % (stamp, previous))
        previous = stamp
        tokens = _int_field(obj, where, "input_length", 1)
        output = _int_field(obj, where, "output_length", 0)
        if "hash_ids" not in obj:
            raise _field(where, "hash_ids", "missing")
        ids = _id_list(obj, where, "hash_ids", 2**64 - 1)
        if len(ids) != -(-tokens // MOONCAKE_BLOCK):
            raise _field(where, "hash_ids", "expected %d ids (ceil(%d/512)), got %d"
                         % (-(-tokens // MOONCAKE_BLOCK), tokens, len(ids)))
        out.append(Request(path, file, number, stamp * 10**6, tokens, output, ids=ids,
                           trace_block_size=MOONCAKE_BLOCK, id_space=("file", file)))
    return out


NATIVE_HEADER = {"kvtier_trace", "block_size", "hash_scope"}
NATIVE_LINE = {"arrival_s", "input_length", "output_length", "block_hashes", "tokens", "session",
               "think_time_s"}


def read_native(path, file, lines, config):
    """kvtier's native JSONL: a header line, then one request a line (docs/traces.md)."""
    number, text = next(lines)
    header, where = _parse(path, number, text), "%s:%d" % (path, number)
    for key in header:
        if key not in NATIVE_HEADER:
            raise _field(where, key, "unknown key")
    if header.get("kvtier_trace") != 1:
        raise _field(where, "kvtier_trace", "expected 1")
    block_size = header.get("block_size")
    if block_size is not None and not (_is_int(block_size) and block_size >= 1):
        raise _field(where, "block_size", "expected an integer >= 1")
    scope = header.get("hash_scope", "file")
    if scope not in ("file", "global"):
        raise _field(where, "hash_scope", 'expected "file" or "global"')
    space = ("global",) if scope == "global" else ("file", file)
    out, previous, sessions, turns = [], 0.0, {}, {}
    for number, text in lines:
        obj, where = _parse(path, number, text), "%s:%d" % (path, number)
        for key in obj:
            if key not in NATIVE_LINE:
                raise _field(where, key, "unknown key")
        arrival = obj.get("arrival_s")
        if not _is_number(arrival) or arrival < 0 or not math.isfinite(arrival):
            raise _field(where, "arrival_s", "expected a number >= 0")
        if arrival < previous:
            raise _field(where, "arrival_s", "%s is earlier than the previous line's %s" % (arrival, previous))
        previous = arrival
        tokens = _int_field(obj, where, "input_length", 1)
        output = _int_field(obj, where, "output_length", 0)
        ids = token_ids = None
        if "block_hashes" in obj and "tokens" in obj:
            raise _field(where, "tokens", "a line carries at most one of block_hashes and tokens")
        if "block_hashes" in obj:
            if block_size is None:
                raise _field(where, "block_hashes", "the header has no block_size")
            ids = _id_list(obj, where, "block_hashes", 2**64 - 1)
            if len(ids) not in (tokens // block_size, -(-tokens // block_size)):
                raise _field(where, "block_hashes", "expected floor or ceil of %d/%d hashes, got %d"
                             % (tokens, block_size, len(ids)))
        if "tokens" in obj:
            token_ids = _id_list(obj, where, "tokens", 2**31 - 1)
            if len(token_ids) != tokens:
                raise _field(where, "tokens", "expected %d token ids, got %d" % (tokens, len(token_ids)))
        session = turn = 0
        if "session" in obj:
            name = obj["session"]
            if not (isinstance(name, str) or _is_int(name)):
                raise _field(where, "session", "expected a string or an integer")
            first = str(name) not in sessions
            sessions.setdefault(str(name), ((file + 1) << 32) | (len(sessions) + 1))
            session = sessions[str(name)]
            turn = turns[session] = turns.get(session, -1) + 1
        if "think_time_s" in obj:
            think = obj["think_time_s"]
            if not _is_number(think) or think < 0:
                raise _field(where, "think_time_s", "expected a number >= 0")
            if not session:
                raise _field(where, "think_time_s", "requires session")
            if first:
                raise _field(where, "think_time_s", "the first line of a session follows nothing")
        out.append(Request(path, file, number, int(math.floor(arrival * 1e9 + 0.5)), tokens, output,
                           ids=ids, trace_block_size=block_size if ids is not None else None,
                           id_space=space if ids is not None else None, tokens=token_ids,
                           session=session, turn=turn))
    return out


def read_traces(paths, config):
    """Reads and merges the files: by arrival, then file index, then file order."""
    merged = []
    for file, path in enumerate(paths):
        lines = _lines(path, config)
        first = next(lines, None)
        if first is None:
            raise RefError("%s: empty trace" % path)
        probe = _parse(path, *first)
        rest = iter([first] + list(lines))
        if "kvtier_trace" in probe:
            merged += read_native(path, file, rest, config)
        elif "timestamp" in probe and "hash_ids" in probe:
            merged += read_mooncake(path, file, rest, config)
        else:
            raise RefError("%s: not a native or Mooncake JSONL trace (the formats this model reads)" % path)
    merged.sort(key=lambda r: (r.arrival_ns, r.file))   # a stable sort keeps file order on ties
    for seq, request in enumerate(merged):
        request.seq = seq
    return merged


# ------------------------------------------------------------------------------ block names

def block_contents(request, C):
    """What each full cache block of the prompt holds, in order (docs/design.md, "Blocks and
    their identity"). A block is named by its whole prefix: (parent's name, contents)."""
    T = request.input_tokens
    if request.tokens is not None:
        return [("tokens", tuple(request.tokens[i * C:(i + 1) * C])) for i in range(T // C)]
    if request.ids is None:   # no identity: floor(T / C) blocks of its own
        return [("own", request.seq, i) for i in range(T // C)]
    tb, out = request.trace_block_size, []
    covered = [min(tb, T - j * tb) for j in range(len(request.ids))]   # only the last is partial
    if tb % C == 0:           # a trace block splits into whole cache blocks
        for j, ident in enumerate(request.ids):
            out += [("id", request.id_space, ident, part) for part in range(covered[j] // C)]
    elif C % tb == 0:         # runs of C / tb full trace blocks merge into one cache block
        run = C // tb
        full = [ident for j, ident in enumerate(request.ids) if covered[j] == tb]
        out = [("ids", request.id_space, tuple(full[i * run:(i + 1) * run]))
               for i in range(len(full) // run)]
    else:
        raise RefError("%s: cache.block_size=%d cannot map the trace's %d-token blocks: one block "
                       "size must be a multiple of the other" % (request.path, C, tb))
    return out


# ------------------------------------------------------------------------------ cache model

class Node:
    """One block of the tree: its copies (device, host), who holds it, its eviction order."""
    __slots__ = ("name", "parent", "children", "device", "host", "filling", "ref", "tick", "hits",
                 "stored", "taken")

    def __init__(self, name, parent):
        self.name, self.parent, self.children = name, parent, {}
        self.device = self.host = self.filling = self.stored = False
        self.taken = False    # chosen as a device victim of the allocation under way
        self.ref, self.tick, self.hits = 0, 0, 1


class Model:
    def __init__(self, config):
        cache, self.C = config["cache"], config["cache"]["block_size"]
        self.D = _blocks(config, "cache", "device", self.C)
        self.H = _blocks(config, "cache", "host", self.C)
        self.S = _blocks(config, "storage", "capacity", self.C)
        self.policy = cache["write_policy"]
        self.threshold = 1 if self.policy == "write_through" else cache["write_through_threshold"]
        self.keep_on_swap_in = self.policy != "write_back" or cache["write_back_host_copy"] == "keep"
        self.storage_write, self.storage_threshold = cache["storage_write"], cache["storage_write_threshold"]
        self.lfu, self.prefix_caching = cache["eviction"] == "lfu", cache["prefix_caching"]
        if self.D == 0:
            raise RefError("cache.device_tokens / cache.device_blocks: the device tier needs at "
                           "least one block of cache.block_size tokens")
        if self.S > 0 and self.H == 0:
            raise RefError("storage.capacity_*: a storage tier needs a host tier (blocks read "
                           "from storage land in host memory)")
        self.root = Node(0, None)
        self.names = {}        # (parent name, contents) -> name: a block's whole prefix
        self.nodes = {}        # name -> Node
        self.storage = {}      # name -> tick of its last put or get (the pool's LRU order)
        self.clock = 0
        self.n_device = self.n_host = 0
        self.loading = None    # the storage block a load is reading
        self.staged = 0        # host blocks holding copies staged for a store, until it has read them
        self.count = dict.fromkeys(("evict_device", "evict_host", "evict_storage", "backups",
                                    "backups_skipped", "write_backs", "swap_ins", "storage_loads",
                                    "storage_stores"), 0)

    # --- small helpers
    def tick(self):
        self.clock += 1
        return self.clock

    def order(self, node):     # LRU: when it last became unreferenced or moved to host;
        # LFU: its hit count first
        return (node.hits, node.tick) if self.lfu else node.tick

    def name_blocks(self, contents):
        names, parent = [], 0
        for c in contents:
            parent = self.names.setdefault((parent, c), len(self.names) + 1)
            names.append(parent)
        return names

    def new_node(self, name, parent, device=False, host=False, hits=1, stored=False):
        assert name not in self.nodes and name not in parent.children
        node = Node(name, parent)
        node.hits, node.stored, node.ref = hits, stored, 1   # made for a request, which holds it
        parent.children[name] = self.nodes[name] = node
        self.set_device(node, device)
        self.set_host(node, host)
        return node

    def set_device(self, node, value):
        self.n_device += int(value) - int(node.device)
        node.device = value

    def set_host(self, node, value):
        self.n_host += int(value) - int(node.host)
        node.host = value

    def remove(self, node):
        assert not node.children and node.ref == 0
        self.set_device(node, False)
        self.set_host(node, False)
        del node.parent.children[node.name]
        del self.nodes[node.name]

    def wants_copy(self, node):   # does the write policy give this device block a host copy?
        return self.policy != "write_back" and node.hits >= self.threshold

    # --- the tiers' evictable sets: leaves only, nobody holding them
    def device_victim(self):
        leaves = [n for n in self.nodes.values() if n.device and n.ref == 0 and not n.taken
                  and not any(c.device and not c.taken for c in n.children.values())]
        return min(leaves, key=self.order, default=None)

    def host_victim(self):
        # an idle host-only leaf first; with none, the host copy of an idle device block, which
        # the full inclusive host tier gives up (the device keeps the block): step 6
        leaves = [n for n in self.nodes.values() if n.host and not n.device and n.ref == 0
                  and not n.children and not n.filling]
        if leaves:
            return min(leaves, key=self.order)
        copies = [n for n in self.nodes.values() if n.host and n.device and n.ref == 0
                  and not n.filling and not n.taken]
        return min(copies, key=self.order, default=None)

    def host_room(self):
        return self.H > 0 and (self.n_host + self.staged < self.H or self.host_victim() is not None)

    def take_host_block(self):
        if self.n_host + self.staged >= self.H:
            self.evict_host(self.host_victim())
        assert self.n_host + self.staged < self.H

    def evict_host(self, node):
        self.count["evict_host"] += 1
        if self.storage_write == "on_host_evict":
            self.store(node)
        if node.device:           # a copy given up: the block stays on the device
            self.set_host(node, False)
        else:
            self.remove(node)

    def evict_device(self, node, write_back):
        self.count["evict_device"] += 1
        node.taken = False
        if node.host:             # backed up: the host copy stays, metadata only
            self.set_device(node, False)
            node.tick = self.tick()
        elif write_back:
            self.take_host_block()
            self.set_host(node, True)
            self.set_device(node, False)
            node.tick, node.filling = self.tick(), True
            self.count["write_backs"] += 1
            self.host_ready(node)
        else:                     # dropped, with the host-only blocks below it
            self.drop_subtree(node)

    def make_device_room(self, need):
        """Evicts until `need` blocks are free. Under write_back, in chunks of at most the host
        room, each chunk's write-backs landed (evictable on the host tier) before the next."""
        while self.n_device + need > self.D:
            chunk = self.n_device + need - self.D
            if self.policy == "write_back":
                room = self.write_back_room()
                chunk = min(chunk, room) if room > 0 else chunk
            # The chunk's victims are chosen together (leaves before the parents they uncover);
            # a chosen victim's host copy is no longer the host tier's to give up. Write-backs
            # get the room left, parents first; a victim without room is dropped.
            victims = []
            for _ in range(chunk):
                node = self.device_victim()
                assert node is not None, "the device has no evictable block"
                node.taken = True
                victims.append(node)
            room = self.write_back_room() if self.policy == "write_back" and self.H > 0 else 0
            granted = set()
            for node in reversed(victims):
                if not node.host and room > 0:
                    room -= 1
                    granted.add(node.name)
            for node in victims:
                self.evict_device(node, node.name in granted)
            for x in self.nodes.values():
                x.filling = False

    def write_back_room(self):
        """Free host blocks, every idle host-only block (they can all go, leaf by leaf) and every
        idle device block's copy not chosen for eviction."""
        idle = sum(1 for x in self.nodes.values() if x.host and x.ref == 0 and not x.filling
                   and not (x.device and x.taken))
        return self.H - self.n_host - self.staged + idle

    def drop_subtree(self, node):
        for child in list(node.children.values()):
            assert not child.device and child.host
            self.drop_subtree(child)
        if node.host:
            self.evict_host(node)
        else:
            self.remove(node)

    # --- storage: an LRU pool of names, every block stored once
    def store(self, node):
        if self.S == 0 or node.stored:
            return
        node.stored = True
        self.count["storage_stores"] += 1  # a put, whether or not it writes
        if node.name in self.storage:      # a put of a stored block writes nothing, but is a put
            self.storage[node.name] = self.tick()
            return
        if len(self.storage) >= self.S:
            # a block being loaded is not evicted (its get holds it): with nothing else to
            # evict the put writes nothing
            others = [k for k in self.storage if k != self.loading]
            if not others:
                return
            victim = min(others, key=self.storage.get)
            del self.storage[victim]
            self.count["evict_storage"] += 1
        self.storage[node.name] = self.tick()

    def host_ready(self, node):   # a backup or write-back made its host copy
        if self.storage_write == "always" or (self.storage_write == "write_through_selective"
                                              and node.hits >= self.storage_threshold):
            self.store(node)

    # --- one request, whole, before the next: docs/design.md, "The hit-rate replay, request by
    #     request", whose steps the comments number
    def process(self, request):
        C, T = self.C, request.input_tokens
        names = self.name_blocks(block_contents(request, C))
        n = len(names)
        p = min(n, self.D)        # blocks that stay on the device; the rest pass through it
        row = {"blocks": n, "uncached": n - p, "device": 0, "host": 0, "storage": 0}
        if not self.prefix_caching:
            return row
        # 1. match: the device's run, then host, then the storage's leading run
        path, parent = [], self.root
        for name in names:
            if name not in parent.children:
                break
            parent = parent.children[name]
            path.append(parent)
        d = 0
        while d < len(path) and path[d].device:
            d += 1
        h = len(path) - d
        assert all(x.host and not x.device for x in path[d:])
        s = 0
        while self.S > 0 and d + h + s < n and names[d + h + s] in self.storage:
            s += 1
        #    a prefix covering the whole prompt gives up its last block: computed, not a hit
        full_hit = n > 0 and d + h + s == n and n * C == T
        if full_hit:
            if s:
                s -= 1
            elif h:
                h -= 1
            else:
                d -= 1
        for x in path:
            x.ref += 1
        # 2. device room for the blocks that stay (its victims go by the write policy)
        need = sum(1 for i in range(p) if not (i < len(path) and path[i].device))
        self.make_device_room(need)
        # 3. storage loads into host memory, the leading ones the host tier has room for
        loaded = 0
        while loaded < s and self.host_room() and names[d + h + loaded] in self.storage:
            name = self.loading = names[d + h + loaded]
            self.take_host_block()        # its stores (on_host_evict) leave `name` stored
            self.loading = None
            path.append(self.new_node(name, path[-1] if path else self.root, host=True, stored=True))
            self.storage[name] = self.tick()
            self.count["storage_loads"] += 1
            loaded += 1
        # the blocks the match found: the hits, and a full hit's last block (computed, but
        # found: it counts toward the thresholds, as FastDeploy's match counts it)
        found = d + h + loaded + int(full_hit and loaded == s)
        s, m, known = loaded, d + h + loaded, len(path)
        # 4. swap-ins of host hits and loaded blocks that stay on the device; then the
        #    computed blocks that stay
        for x in path[d:min(m, p)]:
            self.set_device(x, True)
            self.count["swap_ins"] += 1
            if not self.keep_on_swap_in:
                self.set_host(x, False)
        for i in range(m, p):
            if i < len(path):
                self.set_device(path[i], True)
            else:
                path.append(self.new_node(names[i], path[-1] if path else self.root, device=True,
                                          hits=1 + int(i < found)))
        assert self.n_device <= self.D
        # 5. the blocks the match found count toward the thresholds
        for x in path[:min(found, known)]:
            x.hits += 1
            if (self.storage_write == "write_through_selective" and x.hits == self.storage_threshold
                    and x.host):
                self.store(x)
        # 6. host copies, parent first: backups of the blocks that stay; the blocks that pass
        #    through the device reach the host tier as any block leaving it does
        for i in range(n):
            if i < p:
                x = path[i]
                if x.host or self.H == 0 or not self.wants_copy(x):
                    continue
                if not self.host_room():
                    self.count["backups_skipped"] += 1
                    continue
                self.take_host_block()
                self.set_host(x, True)
                self.count["backups"] += 1
                self.host_ready(x)
            elif i < len(path):
                assert path[i].host       # a host hit or load that did not fit: it stays there
            else:
                copy = self.policy == "write_back" or 1 + int(i < found) >= self.threshold
                if len(path) < i or not copy or self.H == 0:
                    break                 # no name past a block that has none
                if not self.host_room():
                    if self.policy != "write_back":
                        self.count["backups_skipped"] += 1
                    break
                self.take_host_block()
                path.append(self.new_node(names[i], path[-1] if path else self.root, host=True,
                                          hits=1 + int(i < found)))
                self.count["write_backs" if self.policy == "write_back" else "backups"] += 1
                self.host_ready(path[-1])
        # 7. storage writes at finish: what the storage policy wants and is not stored yet,
        #    staged through a host block when it has no host copy; the request's staged
        #    copies are freed together, once its stores have read them
        if self.S > 0 and self.storage_write in ("always", "write_through_selective"):
            for x in path:
                if x.stored or (self.storage_write == "write_through_selective"
                                and x.hits < self.storage_threshold):
                    continue
                if x.host:
                    self.store(x)
                    continue
                if not self.host_room():
                    break                 # the rest of the path is not stored
                assert x.device and not self.wants_copy(x)   # else step 6 had copied it
                self.take_host_block()
                self.staged += 1
                self.count["backups"] += 1
                self.store(x)
            self.staged = 0
        # 8. release, tail first: the deepest block becomes the oldest
        for x in reversed(path):
            x.ref -= 1
            assert x.ref == 0
            x.tick = self.tick()
        row.update(device=d, host=h, storage=s)
        assert (d + h + s) * C < T, "a hit never covers the whole prompt"
        return row

    # --- invariants (docs/design.md, "Invariants"), checked between requests
    def check(self):
        device = host = 0
        for name, x in self.nodes.items():
            assert x.name == name and x.parent.children.get(name) is x, "tree links"
            assert x.parent is self.root or x.parent.name in self.nodes, "an orphan"
            assert x.device or x.host, "a node without a copy"
            assert x.ref == 0, "a hold left after its request"
            assert x.parent is self.root or x.parent.device or not x.device, "device prefix closure"
            assert x.hits >= 1 and not x.filling
            device += x.device
            host += x.host
        assert device == self.n_device <= self.D, "device count"
        assert host == self.n_host <= self.H, "host count"
        assert len(self.storage) <= self.S, "storage count"
        assert len({x.tick for x in self.nodes.values()}) == len(self.nodes), "keys are unique"


def replay(requests, config, check_every=0):
    """Replays parsed requests (read_traces) under an effective config (load_config); returns
    (rows, summary): one dict per request with the CSV's columns, and the summary."""
    if "cache" not in config or "block_size" not in config["cache"]:
        raise RefError("replay() needs an effective config: use load_config()")
    model, C = Model(config), config["cache"]["block_size"]
    limit, scale = config["trace"]["max_blocks_per_request"], config["trace"]["time_scale"]
    rows, totals = [], {"blocks": 0, "tokens": 0, "inputs": 0, "outputs": 0, "uncached": 0}
    hits = {t: [0, 0] for t in ("device", "host", "storage")}
    for k, request in enumerate(requests):
        if -(-request.input_tokens // C) > limit:
            raise RefError("%s:%d: %d cache blocks is more than trace.max_blocks_per_request (%d)"
                           % (request.path, request.line, -(-request.input_tokens // C), limit))
        row = model.process(request)
        if check_every and (k + 1) % check_every == 0:
            model.check()
        ns = int(math.floor(request.arrival_ns * scale + 0.5))
        micros = (ns + 500) // 1000
        rows.append({"seq": request.seq, "file": request.file, "line": request.line,
                     "arrival_s": "%d.%06d" % (micros // 10**6, micros % 10**6),
                     "input_tokens": request.input_tokens, "output_tokens": request.output_tokens,
                     "blocks": row["blocks"],
                     "device_hit_blocks": row["device"], "host_hit_blocks": row["host"],
                     "storage_hit_blocks": row["storage"], "device_hit_tokens": row["device"] * C,
                     "host_hit_tokens": row["host"] * C, "storage_hit_tokens": row["storage"] * C,
                     "uncached_blocks": row["uncached"]})
        for tier in hits:
            hits[tier][0] += row[tier]
            hits[tier][1] += row[tier] * C
        totals["blocks"] += row["blocks"]
        totals["inputs"] += request.input_tokens
        totals["outputs"] += request.output_tokens
        totals["uncached"] += row["uncached"]
    model.check()

    def ratio(part, whole):
        return round(part / whole, 6) if whole else 0.0
    all_blocks, all_tokens = sum(v[0] for v in hits.values()), sum(v[1] for v in hits.values())
    count = model.count
    summary = {
        "mode": "hitrate",
        "reference": "tools/reference/kvtier_ref.py (a reference model, not kvtier)",
        "trace": {"requests": len(requests), "blocks": totals["blocks"],
                  "input_tokens": totals["inputs"], "output_tokens": totals["outputs"]},
        "hit_ratio": {"blocks": ratio(all_blocks, totals["blocks"]),
                      "tokens": ratio(all_tokens, totals["inputs"]),
                      "by_tier": {t: {"blocks": ratio(v[0], totals["blocks"]),
                                      "tokens": ratio(v[1], totals["inputs"])}
                                  for t, v in hits.items()}},
        "hits": {"blocks": {t: v[0] for t, v in hits.items()},
                 "tokens": {t: v[1] for t, v in hits.items()}},
        "evictions": {"device": count["evict_device"], "host": count["evict_host"],
                      "storage": count["evict_storage"]},
        "transfers": {k: count[k] for k in ("backups", "backups_skipped", "write_backs",
                                             "swap_ins", "storage_loads", "storage_stores")},
        "occupancy": {"device_blocks": model.n_device, "host_blocks": model.n_host,
                      "storage_blocks": len(model.storage), "tree_nodes": len(model.nodes)},
        "uncached_blocks": totals["uncached"],
    }
    return rows, summary


# -------------------------------------------------------------------------------------- CLI

def _write_atomically(path, text):
    temporary = "%s.tmp.%d" % (path, os.getpid())
    with open(temporary, "w") as f:
        f.write(text)
    os.replace(temporary, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config")
    parser.add_argument("--trace", action="append", required=True)
    parser.add_argument("--set", action="append", default=[], dest="sets")
    parser.add_argument("--out", required=True)
    parser.add_argument("--check-every", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.sets)
        rows, summary = replay(read_traces(args.trace, config), config, args.check_every)
    except RefError as e:
        print("kvtier_ref: %s" % e, file=sys.stderr)
        return 2
    except AssertionError as e:
        print("kvtier_ref: invariant violated: %s" % e, file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    csv = [",".join(CSV_COLUMNS)] + [",".join(str(r[c]) for c in CSV_COLUMNS) for r in rows]
    _write_atomically(os.path.join(args.out, "requests.csv"), "\n".join(csv) + "\n")
    _write_atomically(os.path.join(args.out, "summary.json"), json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
