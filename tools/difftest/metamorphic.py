"""Metamorphic properties of kvtier's replays on random small cases (tools/difftest/cases.py),
docs/design.md, "Checking the model":

  monotone    growing a tier (device, host or storage) never lowers the hit-rate replay's hits,
              under the conditions docs/design.md states (LRU, ...); cases outside them are run
              and counted but cannot fail (`--all` shows where the property breaks);
  policies    write_back and write_through give the same hits, request by request and tier by
              tier, when storage is off and no tier evicts a block (the host holds every block);
  tokens      full mode: every prompt token is a hit or computed, once, except what a preemption
              recomputes, and `recomputed_tokens` counts exactly those;
  links       full mode: each link carries each copy's bytes once (the bytes on every link are
              its transfers times the block's bytes).

  tools/metamorphic --cases 2000                   # every property, 2,000 cases each
  tools/metamorphic --property monotone --cases 200 --first 5001
  tools/metamorphic --property monotone --all      # where the property breaks, by policy

Each failure prints its seed and a command line that reproduces it."""

import argparse
import collections
import concurrent.futures
import copy
import json
import os
import random
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases  # noqa: E402
import runner  # noqa: E402

TIERS = {"device": "cache.device_blocks", "host": "cache.host_blocks",
         "storage": "storage.capacity_blocks"}


# More blocks than any drawn case names (24 requests of at most a few dozen blocks, two files).
HOLDS_EVERY_BLOCK = 100000


def blocks_config(case):
    """The case with its tier sizes in blocks (a drawn case may give them in tokens)."""
    c = copy.deepcopy(case)
    cfg = c["config"]
    block = cfg["cache.block_size"]
    for key, tokens in (("cache.device_blocks", "cache.device_tokens"),
                        ("cache.host_blocks", "cache.host_tokens"),
                        ("storage.capacity_blocks", "storage.capacity_tokens")):
        if tokens in cfg:
            cfg[key] = cfg.pop(tokens) // block
    return c


def monotone_conditions(cfg, tier):
    """Why the monotone property need not hold for growing `tier` under this config, or None
    when it must (docs/design.md, "Checking the model", where it is shown to break otherwise)."""
    if cfg.get("cache.eviction") == "lfu":
        return "lfu"  # hit counts, not recency, order a tier: no tier is an LRU stack
    if tier == "storage" and cfg["storage.capacity_blocks"] == 0:
        return "storage turned on"  # its stores are staged through host blocks
    if tier == "host" and cfg["storage.capacity_blocks"] > 0:
        return "host with storage"  # what reaches storage, and when, follows the host's evictions
    if tier == "device" and cfg["storage.capacity_blocks"] > 0:
        if cfg.get("cache.storage_write") == "on_host_evict":
            # Storage is fed by the host's evictions, which a larger device reorders or avoids:
            # a block the smaller device pushed into storage in time may be gone from every tier.
            return "device with storage fed by host evictions"
    return None


def hits_of(outcome):
    rows = outcome.rows
    return sum(int(r["device_hit_blocks"]) + int(r["host_hit_blocks"])
               + int(r["storage_hit_blocks"]) for r in rows)


def run_hitrate(case, sets=()):
    files = runner.CaseFiles(case)
    try:
        extra = []
        for k, v in sets:
            extra += ["--set", f"{k}={json.dumps(v) if not isinstance(v, str) else v}"]
        return runner.run_kvtier(files, "hitrate", extra)
    finally:
        files.close()


def command_of(case, mode="hitrate", sets=()):
    text = json.dumps(case, separators=(",", ":"))
    s = "".join(f" --set {k}={v}" for k, v in sets)
    return f"tools/metamorphic --case {shlex.quote(text)} --mode {mode}{shlex.quote(s) if s else ''}"


def check_monotone(seed, without, record):
    case = blocks_config(cases.draw_case(seed, without))
    cfg = case["config"]
    rng = random.Random(seed)
    tier = rng.choice([t for t in TIERS if not (t == "storage" and cfg["cache.host_blocks"] == 0)])
    now = cfg[TIERS[tier]]
    grown = now + rng.choice([1, 1, 2, 3, max(1, now), 8, 20])
    return compare_growth(case, tier, grown, record)


def compare_growth(case, tier, grown, record):
    """Whether growing `tier` of `case` (sizes in blocks) to `grown` blocks lowers the hits."""
    cfg, key = case["config"], TIERS[tier]
    now = cfg[key]
    base = run_hitrate(case)
    big = copy.deepcopy(case)
    big["config"][key] = grown
    bigger = run_hitrate(big)
    if base.error or bigger.error:
        return f"a run failed: {base.error or bigger.error}"
    if base.refused or bigger.refused:
        return None
    h0, h1 = hits_of(base), hits_of(bigger)
    excuse = monotone_conditions(cfg, tier)
    label = (tier, cfg.get("cache.eviction"),
             "storage" if cfg["storage.capacity_blocks"] else "no storage",
             "excused: " + excuse if excuse else "must hold")
    record[label][0] += 1
    if h1 < h0:
        record[label][1] += 1
        if excuse is None:
            return (f"{tier} {now} -> {grown} blocks lowers the hits from {h0} to {h1}\n"
                    f"  smaller: {command_of(case)}\n  larger:  {command_of(big)}")
    return None


def check_policies(seed, without, record):
    case = blocks_config(cases.draw_case(seed, without))
    cfg = case["config"]
    cfg["storage.capacity_blocks"] = 0
    cfg["cache.host_blocks"] = HOLDS_EVERY_BLOCK
    out = {}
    for policy in ("write_through", "write_back"):
        c = copy.deepcopy(case)
        c["config"]["cache.write_policy"] = policy
        out[policy] = (c, run_hitrate(c))
    (ca, a), (cb, b) = out["write_through"], out["write_back"]
    if a.error or b.error:
        return f"a run failed: {a.error or b.error}"
    if a.refused or b.refused:
        return None
    evicted = [o.summary["evictions"]["host"] for o in (a, b)]
    if any(evicted):
        return f"the host tier evicted {evicted} blocks: the case does not test the property"
    record[("policies",)][0] += 1
    diff = runner.compare(a, b, ("write_through", "write_back"),
                          [c for c in runner.COLUMNS if "hit" in c], [])
    if diff:
        record[("policies",)][1] += 1
        return f"{diff}\n  write_through: {command_of(ca)}\n  write_back:    {command_of(cb)}"
    return None


def full_case(seed, without):
    """A case for the full replay with preemption likely: a small device and outputs."""
    case = blocks_config(cases.draw_case(seed, without))
    rng = random.Random(seed + 7)
    squeeze = rng.choice([1.0, 0.1, 0.0])  # arrivals closer together: more run at once
    for t in case["traces"]:
        for line in t["lines"]:
            line["output_length"] = rng.randint(1, 40)
            line["arrival_s"] = round(line["arrival_s"] * squeeze, 6)
    cfg = case["config"]
    modes = ["recompute", "recompute"]
    modes += ["swap_to_host"] if cfg["cache.host_blocks"] else []
    modes += ["save_to_storage"] if cfg["storage.capacity_blocks"] else []
    cfg["scheduler.preemption"] = rng.choice(modes)
    case["config"]["scheduler.reserve_output_blocks"] = rng.choice([0, 0, 1, 16])
    case["config"]["scheduler.token_budget"] = rng.choice([16, 64, 8192])
    return case


def run_full(case):
    files = runner.CaseFiles(case)
    try:
        return runner.run_kvtier(files, "full")
    finally:
        files.close()


def check_tokens(seed, without, record):
    case = full_case(seed, without)
    o = run_full(case)
    if o.error:
        return f"full replay failed: {o.error}\n  {command_of(case, 'full')}"
    if o.refused:
        return None
    extra_total, wrong = 0, []
    for r in o.rows:
        if not r["finish_s"]:
            continue
        hits = int(r["first_hit_tokens"])
        computed = int(r["computed_tokens"])
        extra = hits + computed - int(r["input_tokens"])
        if int(r["preemptions"]) == 0 and extra != 0:
            wrong.append(f"request seq {r['seq']}: hits {hits} + computed {computed} != prompt "
                         f"{r['input_tokens']}")
        extra_total += extra
    recomputed = o.summary["recomputed_tokens"]
    preempted = o.summary["preemptions"]
    record[("tokens", "preempted" if preempted else "none preempted")][0] += 1
    # Per request, first hits + computed + late hits = prompt + recomputed: the replay checks it
    # at its end (a violation exits 1, a failure above); requests.csv has no late hits, which
    # only lower the sum here.
    if extra_total > recomputed or (preempted == 0 and extra_total != recomputed):
        wrong.append(f"recomputed_tokens {recomputed}, but the requests computed {extra_total} "
                     f"tokens beyond their prompts' uncached part")
    if wrong:
        record[("tokens", "preempted" if preempted else "none preempted")][1] += 1
        return "; ".join(wrong[:3]) + f"\n  {command_of(case, 'full')}"
    return None


def block_bytes(summary):
    return summary["model"]["kv_bytes_per_token_per_rank"] * summary["config"]["cache"]["block_size"]


def check_links(seed, without, record):
    case = full_case(seed, without)
    o = run_full(case)
    if o.error:
        return f"full replay failed: {o.error}\n  {command_of(case, 'full')}"
    if o.refused:
        return None
    s = o.summary
    x, bb = s["transfers"], block_bytes(s)

    def link(prefix):
        return sum(l["bytes"] for l in s["traffic"]["links"] if l["name"].startswith(prefix))

    h2d, d2h = link("h2d"), link("d2h")
    wrong = []
    expect = {
        "h2d link": (h2d, x["swap_ins"] * bb),
        "d2h link": (d2h, (x["backups"] + x["write_backs"]) * bb),
        "pcie duplex": (link("pcie_duplex"), h2d + d2h),
        "traffic.h2d_bytes": (s["traffic"]["h2d_bytes"], h2d),
        "traffic.d2h_bytes": (s["traffic"]["d2h_bytes"], d2h),
        "storage read": (link("storage0.read"), x["storage_loads"] * bb),
        "traffic.storage_write_bytes": (s["traffic"]["storage_write_bytes"],
                                        x["storage_stores"] * bb),
    }
    pool = s["storage"]["pool"]
    written = (x["storage_stores"] - pool["put_present"] - pool["put_in_flight"]
               - s["storage"]["puts_dropped"])
    expect["storage write"] = (link("storage0.write"), written * bb)
    for name, (got, want) in expect.items():
        if got != want:
            wrong.append(f"{name}: {got} bytes, expected {want}")
    record[("links",)][0] += 1
    if wrong:
        record[("links",)][1] += 1
        return "; ".join(wrong) + f"\n  {command_of(case, 'full')}"
    return None


PROPERTIES = {"monotone": check_monotone, "policies": check_policies, "tokens": check_tokens,
              "links": check_links}


def run_property(name, args, without):
    check = PROPERTIES[name]
    record = collections.defaultdict(lambda: [0, 0])
    start = time.time()
    failures = 0
    seeds = range(args.first, args.first + args.cases)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for seed, why in zip(seeds, pool.map(lambda s: check(s, without, record), seeds)):
            if why:
                failures += 1
                if failures <= args.max_failures:
                    print(f"metamorphic {name}: seed {seed}: {why}", flush=True)
    checked = sum(v[0] for v in record.values())
    print(f"metamorphic {name}: {args.cases} cases, {checked} checked, {failures} failures, "
          f"{time.time() - start:.1f} s; {runner.kvtier_version()}", flush=True)
    if args.all:
        for label, (n, broke) in sorted(record.items(), key=lambda kv: str(kv[0])):
            print(f"  {' / '.join(map(str, label))}: {broke} of {n} lower", flush=True)
    return failures


def run_case(args):
    case = json.loads(args.case)
    sets = [tuple(s.split("=", 1)) for s in shlex.split(args.set or "") if s != "--set"]
    files = runner.CaseFiles(case)
    try:
        extra = [x for k, v in sets for x in ("--set", f"{k}={v}")]
        o = runner.run_kvtier(files, args.mode, extra)
        print("kvtier: " + " ".join(shlex.quote(x) for x in
                                    runner.kvtier_command(files, "OUT", args.mode, extra)))
        if o.error or o.refused:
            print(o.error or o.refused)
            return 1
        print(json.dumps({k: o.summary.get(k) for k in ("hit_ratio", "hits", "transfers",
                                                         "recomputed_tokens")}, indent=1))
        for r in o.rows:
            print(",".join(r.values()))
    finally:
        files.close()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="tools/metamorphic", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--property", choices=sorted(PROPERTIES), action="append",
                   help="which (repeatable; default all)")
    p.add_argument("--cases", type=int, default=2000, help="cases per property (default 2000)")
    p.add_argument("--first", type=int, default=1, help="the first case's seed")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--without", default="", help="features the cases leave out")
    p.add_argument("--all", action="store_true",
                   help="count where each property breaks, outside its conditions too")
    p.add_argument("--max-failures", type=int, default=5)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--case", help="run one case (JSON, as a failure prints it)")
    p.add_argument("--mode", default="hitrate")
    p.add_argument("--set", help="with --case: '--set k=v ...'")
    args = p.parse_args(argv)
    if args.case:
        return run_case(args)
    without = [w for w in args.without.split(",") if w]
    failures = 0
    for name in args.property or sorted(PROPERTIES):
        failures += run_property(name, args, without)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
