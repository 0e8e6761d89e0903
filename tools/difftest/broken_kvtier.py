#!/usr/bin/python3
"""A deliberately broken stand-in for the kvtier binary, to show that each check of
tools/differential and tools/metamorphic fails when the model is wrong
(tools/difftest/test_checks_fire.py). Never used to judge kvtier itself.

Takes kvtier's `replay` command line (as tools/difftest/runner.py builds it). KVTIER_BROKEN names
the defect:

  hitrate mode, the reference model (tools/reference/) with one rule broken:
    pinned_copies    a full host tier skips backups instead of giving up copies (the reference's
                     first reading, which kvtier's hit-rate replay does not follow)
    mru              the device evicts its most recently used leaf
    move_device      a backup that finds the host full moves the LRU idle device block off the
                     device (the rule that shrank the cache to the host's size)
    write_back_mru   under write_back, the device evicts its most recently used leaf
  full mode, the real binary (KVTIER_REAL_BIN) with its outputs corrupted:
    recomputed       summary.recomputed_tokens one short (a recomputed token not counted)
    computed         one request's computed_tokens one more (a prompt token computed twice)
    link_bytes       the d2h link carries one more block's bytes than its copies
    full_hits        a full replay's device hit moved to the host column (--modes)
"""

import csv
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def reference():
    spec = importlib.util.spec_from_file_location(
        "kvtier_ref", os.path.join(ROOT, "tools", "reference", "kvtier_ref.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def break_reference(ref, defect):
    model = ref.Model
    if defect == "pinned_copies":
        def host_victim(self):
            leaves = [n for n in self.nodes.values() if n.host and not n.device and n.ref == 0
                      and not n.children and not n.filling]
            return min(leaves, key=self.order, default=None)
        model.host_victim = host_victim
    elif defect == "mru":
        original = model.device_victim

        def device_victim(self):
            leaves = [n for n in self.nodes.values() if n.device and n.ref == 0 and not n.taken
                      and not any(c.device and not c.taken for c in n.children.values())]
            return max(leaves, key=self.order, default=None) if leaves else original(self)
        model.device_victim = device_victim
    elif defect == "move_device":
        def host_victim(self):
            leaves = [n for n in self.nodes.values() if n.host and not n.device and n.ref == 0
                      and not n.children and not n.filling]
            if leaves:
                return min(leaves, key=self.order)
            copies = [n for n in self.nodes.values() if n.host and n.device and n.ref == 0
                      and not n.filling and not n.taken and not n.children]
            return min(copies, key=self.order, default=None)

        def evict_host(self, node):  # a device block with a copy leaves both tiers
            self.count["evict_host"] += 1
            self.remove(node)
        model.host_victim, model.evict_host = host_victim, evict_host
    elif defect == "write_back_mru":
        original = model.device_victim

        def device_victim(self):
            if self.policy != "write_back":
                return original(self)
            leaves = [n for n in self.nodes.values() if n.device and n.ref == 0 and not n.taken
                      and not any(c.device and not c.taken for c in n.children.values())]
            return max(leaves, key=self.order, default=None)
        model.device_victim = device_victim
    else:
        raise SystemExit(f"broken_kvtier: no such defect for hit-rate mode: {defect}")


def parse(argv):
    """kvtier replay's options as runner.py passes them."""
    opts = {"traces": [], "sets": []}
    it = iter(argv[1:])
    for a in it:
        if a in ("--mode", "--config", "--out"):
            opts[a[2:]] = next(it)
        elif a == "--trace":
            opts["traces"].append(next(it))
        elif a == "--set":
            opts["sets"].append(next(it))
    return opts


def corrupt_full(out, defect):
    summary_path, rows_path = os.path.join(out, "summary.json"), os.path.join(out, "requests.csv")
    with open(summary_path) as f:
        summary = json.load(f)
    with open(rows_path) as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    if defect == "recomputed":
        summary["recomputed_tokens"] -= 1
    elif defect == "computed":
        done = [r for r in rows if r["finish_s"]]
        done[0]["computed_tokens"] = str(int(done[0]["computed_tokens"]) + 1)
    elif defect == "link_bytes":
        d2h = [link for link in summary["traffic"]["links"] if link["name"].startswith("d2h")]
        d2h[0]["bytes"] += (summary["model"]["kv_bytes_per_token_per_rank"]
                            * summary["config"]["cache"]["block_size"])
    elif defect == "full_hits":
        for r in rows:
            if int(r["device_hit_blocks"]) > 0:
                r["device_hit_blocks"] = str(int(r["device_hit_blocks"]) - 1)
                r["host_hit_blocks"] = str(int(r["host_hit_blocks"]) + 1)
                break
    else:
        raise SystemExit(f"broken_kvtier: no such defect for full mode: {defect}")
    with open(summary_path, "w") as f:
        json.dump(summary, f)
    with open(rows_path, "w", newline="") as f:
        w = csv.DictWriter(f, fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main(argv):
    defect = os.environ["KVTIER_BROKEN"]
    opts = parse(argv)
    if opts["mode"] == "full":
        real = os.environ["KVTIER_REAL_BIN"]
        p = subprocess.run([real] + argv, capture_output=True, text=True)
        sys.stderr.write(p.stderr)
        if p.returncode == 0:
            corrupt_full(opts["out"], defect)
        return p.returncode
    if defect == "full_hits":  # hit-rate mode unbroken: the modes check must see the difference
        p = subprocess.run([os.environ["KVTIER_REAL_BIN"]] + argv)
        return p.returncode
    ref = reference()
    break_reference(ref, defect)
    args = ["--config", opts["config"], "--out", opts["out"]]
    for t in opts["traces"]:
        args += ["--trace", t]
    for s in opts["sets"]:
        args += ["--set", s]
    return ref.main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
