"""Differential runs: random small cases through `kvtier replay --mode hitrate` and the reference
model (tools/reference/), compared request by request, tier by tier (docs/design.md, "Checking
the model"). Also holds the full replay to the hit-rate one on random cases
where tests/e2e/modes_agree_test.cpp says the two must agree (--modes).

  tools/differential --cases 500                 # cases of seeds 1..500; exit 1 on a divergence
  tools/differential --cases 20000 --first 1001  # a longer run (BENCHMARKS.md)
  tools/differential --modes --cases 100         # full mode against hit-rate mode
  tools/differential --case '{"config": ...}'    # one case, as a divergence prints it

A divergence is shrunk (tools/difftest/shrink.py) and printed as one command line that
reproduces it, the case inline."""

import argparse
import concurrent.futures
import copy
import json
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases  # noqa: E402
import runner  # noqa: E402
import shrink  # noqa: E402

# Full mode matches hit-rate mode only with tiers that never evict and one request at a time
# (tests/e2e/modes_agree_test.cpp); per-tier hit columns only: full mode's other columns differ.
AGREE = {"scheduler.max_num_seqs": 1, "cache.device_tokens": 10**9, "cache.host_tokens": 10**9}
AGREE_COLUMNS = ["blocks", "device_hit_blocks", "host_hit_blocks", "storage_hit_blocks",
                 "device_hit_tokens", "host_hit_tokens", "storage_hit_tokens"]


def modes_case(case):
    c = copy.deepcopy(case)
    # A session turn waits for the previous turn to finish in full mode, where hit-rate mode
    # takes it at its recorded arrival: turns keep their sessions but lose their think times.
    for t in c["traces"]:
        for line in t["lines"]:
            line.pop("think_time_s", None)
    # Arrivals apart, in the hit-rate replay's order (arrival, file, line): in full mode a tie
    # is served in the order the requests' storage lookups end, and a request whose only block
    # holds its last token asks storage nothing, so it goes first; hit-rate mode has no clock.
    order = sorted(((line["arrival_s"], f, i) for f, t in enumerate(c["traces"])
                    for i, line in enumerate(t["lines"])))
    for rank, (_, f, i) in enumerate(order):
        c["traces"][f]["lines"][i]["arrival_s"] = float(rank)
    cfg = c["config"]
    stored = cfg.get("storage.capacity_blocks", 0) or cfg.get("storage.capacity_tokens", 0)
    for k in ("cache.device_blocks", "cache.host_blocks", "cache.device_tokens",
              "cache.host_tokens", "storage.capacity_blocks", "storage.capacity_tokens"):
        cfg.pop(k, None)
    cfg.update(AGREE)
    # storage, where the case has it, never evicts either (0 keeps it off)
    cfg["storage.capacity_tokens"] = 10**9 if stored else 0
    return c


def judge(case, modes=False):
    """(difference or None, refused reason or None) for one case."""
    files = runner.CaseFiles(case)
    try:
        if modes:
            c = modes_case(case)
            files.close()
            files = runner.CaseFiles(c)
            a = runner.run_kvtier(files, "hitrate")
            b = runner.run_kvtier(files, "full")
            if a.refused or b.refused:
                return None, a.refused or b.refused
            # full mode lists requests in finishing order: compare by (file, line)
            b.rows.sort(key=lambda r: (int(r["file"]), int(r["line"])))
            a.rows.sort(key=lambda r: (int(r["file"]), int(r["line"])))
            return runner.compare(a, b, ("hitrate", "full"), AGREE_COLUMNS, []), None
        a = runner.run_kvtier(files)
        b = runner.run_reference(files)
        if a.refused and b.refused:
            return None, "both refused: " + a.refused
        if a.refused or b.refused:
            who = "kvtier" if a.refused else "reference"
            return f"{who} refused the case: {a.refused or b.refused}", None
        return runner.compare(a, b), None
    finally:
        files.close()


def reproduce_command(case, modes):
    text = json.dumps(case, separators=(",", ":"))
    flag = " --modes" if modes else ""
    return f"tools/differential{flag} --case {shlex.quote(text)}"


def report_divergence(case, why, modes, do_shrink):
    print(f"differential: seed {case.get('seed')}: {why}", flush=True)
    if do_shrink:
        def fails(c):
            diff, _ = judge(c, modes)
            return diff is not None
        small = shrink.shrink(case, fails)
        small["seed"] = case.get("seed")
        why, _ = judge(small, modes)
        lines = sum(len(t["lines"]) for t in small["traces"])
        print(f"differential: shrunk to {lines} requests: {why}", flush=True)
        case = small
    print("reproduce: " + reproduce_command(case, modes), flush=True)


def run_many(args):
    seeds = range(args.first, args.first + args.cases)
    without = [w for w in args.without.split(",") if w]
    start = time.time()
    divergences, refused, done = 0, 0, 0
    workers = max(1, args.jobs)

    def one(seed):
        case = cases.draw_case(seed, without)
        diff, ref = judge(case, args.modes)
        return case, diff, ref

    # kvtier runs as a process per case; the reference runs in this interpreter, so threads
    # overlap the two (the reference holds the interpreter while kvtier runs).
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for case, diff, ref in pool.map(one, seeds):
            done += 1
            if ref:
                refused += 1
                if args.verbose:
                    print(f"differential: seed {case['seed']}: refused: {ref}")
            if diff:
                divergences += 1
                report_divergence(case, diff, args.modes, not args.no_shrink)
                if divergences >= args.max_divergences:
                    break
            if args.progress and done % 500 == 0:
                print(f"differential: {done}/{args.cases} cases, {divergences} divergences, "
                      f"{time.time() - start:.0f} s", file=sys.__stderr__, flush=True)
    what = "full mode against hit-rate mode" if args.modes else "kvtier against the reference"
    print(f"differential: {done} cases ({what}; seeds {args.first}-{args.first + done - 1}), "
          f"{divergences} divergences, {refused} refused by both, "
          f"{time.time() - start:.1f} s; {runner.kvtier_version()}", flush=True)
    return 1 if divergences else 0


def show(name, outcome, columns):
    print(f"{name}:")
    if outcome.error or outcome.refused:
        print("  " + (outcome.error or outcome.refused))
        return
    print("  " + " ".join(columns))
    for r in outcome.rows:
        print("  " + " ".join(str(r.get(c, "")) for c in columns))
    for section in ("transfers", "evictions", "occupancy"):
        print(f"  {section}: {json.dumps(outcome.summary.get(section), sort_keys=True)}")


def run_one(args):
    """One case: both sides' rows and summaries, then the first difference."""
    case = json.loads(args.case)
    if args.modes:
        case = modes_case(case)
    files = runner.CaseFiles(case)
    try:
        print("config: " + json.dumps(case["config"], sort_keys=True))
        for i, t in enumerate(case["traces"]):
            print(f"trace {i}: {json.dumps(t['header'])}")
            for line in t["lines"]:
                print("  " + json.dumps(line))
        print("kvtier: " + " ".join(shlex.quote(x) for x in
                                    runner.kvtier_command(files, "OUT", "hitrate")))
        a = runner.run_kvtier(files)
        if args.modes:
            b, names, columns = runner.run_kvtier(files, "full"), ("hitrate", "full"), AGREE_COLUMNS
            for o in (a, b):
                o.rows.sort(key=lambda r: (int(r["file"]), int(r["line"])))
        else:
            b, names, columns = runner.run_reference(files), ("kvtier", "reference"), runner.COLUMNS
        short = ["seq"] + [c for c in columns if c.endswith("_blocks") or c == "blocks"]
        show(names[0], a, short)
        show(names[1], b, short)
        diff = runner.compare(a, b, names, columns, [] if args.modes else runner.SUMMARY_KEYS)
    finally:
        files.close()
    print(f"difference: {diff}" if diff else "no difference")
    return 1 if diff else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="tools/differential", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=500, help="how many cases (default 500)")
    p.add_argument("--first", type=int, default=1, help="the first case's seed (default 1)")
    p.add_argument("--jobs", type=int, default=2, help="cases at once (default 2)")
    p.add_argument("--modes", action="store_true",
                   help="full mode against hit-rate mode instead of kvtier against the reference")
    p.add_argument("--case", help="run one case (JSON, as a divergence prints it)")
    p.add_argument("--without", default="",
                   help="features the cases leave out, comma-separated: " + ",".join(cases.FEATURES))
    p.add_argument("--no-shrink", action="store_true", help="print divergences unshrunk")
    p.add_argument("--max-divergences", type=int, default=5,
                   help="stop after this many (default 5)")
    p.add_argument("--progress", action="store_true", help="progress on stderr")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.case:
        return run_one(args)
    return run_many(args)


if __name__ == "__main__":
    sys.exit(main())
