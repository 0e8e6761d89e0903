"""Runs a case (tools/difftest/cases.py) through `kvtier replay` and through the reference model
(tools/reference/kvtier_ref.py), and compares what they say request by request, tier by tier."""

import csv
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

from cases import trace_text

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# KVTIER_REFERENCE picks another copy of the reference (a candidate correction, say).
REFERENCE = os.environ.get("KVTIER_REFERENCE",
                           os.path.join(ROOT, "tools", "reference", "kvtier_ref.py"))

# requests.csv of the hit-rate replay (docs/outputs.md): the columns both sides must agree on.
COLUMNS = ["seq", "file", "line", "input_tokens", "output_tokens", "blocks",
           "device_hit_blocks", "host_hit_blocks", "storage_hit_blocks",
           "device_hit_tokens", "host_hit_tokens", "storage_hit_tokens", "uncached_blocks"]
# summary.json figures compared when both sides give them.
SUMMARY_KEYS = [
    ("hit_ratio", "blocks"), ("hit_ratio", "tokens"),
    ("hits", "blocks", "device"), ("hits", "blocks", "host"), ("hits", "blocks", "storage"),
    ("hits", "tokens", "device"), ("hits", "tokens", "host"), ("hits", "tokens", "storage"),
    ("transfers", "backups"), ("transfers", "write_backs"), ("transfers", "swap_ins"),
    ("transfers", "storage_loads"), ("transfers", "storage_stores"),
    ("occupancy", "device_blocks"), ("occupancy", "host_blocks"),
    ("occupancy", "storage_blocks"), ("uncached_blocks",),
]


RUN_TIMEOUT_S = 120


def kvtier_binary():
    return os.environ.get("KVTIER_BIN", os.path.join(ROOT, "build", "kvtier"))


def kvtier_version():
    """What `kvtier --version` says, for the summary line of a run (every output names the
    kvtier that made it)."""
    try:
        p = subprocess.run([kvtier_binary(), "--version"], capture_output=True, text=True,
                           timeout=30)
        return p.stdout.strip() or p.stderr.strip()
    except OSError as e:
        return f"no kvtier at {kvtier_binary()}: {e}"


class CaseFiles:
    """A case written out: config.json and trace files in a scratch folder."""

    def __init__(self, case, folder=None):
        self.own = folder is None
        self.dir = folder or tempfile.mkdtemp(prefix="kvtier-diff-")
        os.makedirs(self.dir, exist_ok=True)
        self.traces = []
        for i, t in enumerate(case["traces"]):
            path = os.path.join(self.dir, f"trace{i}.jsonl")
            with open(path, "w") as f:
                f.write(trace_text(t))
            self.traces.append(path)
        self.config = os.path.join(self.dir, "config.json")
        with open(self.config, "w") as f:
            json.dump(nested(case["config"]), f, indent=1, sort_keys=True)

    def close(self):
        if self.own:
            shutil.rmtree(self.dir, ignore_errors=True)


def nested(flat):
    out = {}
    for key, value in flat.items():
        d = out
        parts = key.split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = value
    return out


def kvtier_command(files, out, mode="hitrate", extra=()):
    cmd = [kvtier_binary(), "replay", "--mode", mode, "--deterministic", "--quiet",
           "--config", files.config]
    for t in files.traces:
        cmd += ["--trace", t]
    return cmd + list(extra) + ["--out", out]


class Outcome:
    """What one side said: rows of requests.csv (dicts of text), the summary, or an error."""

    def __init__(self, rows=None, summary=None, error=None, refused=None):
        self.rows = rows or []
        self.summary = summary or {}
        self.error = error      # a failure (crash, violation): a divergence in itself
        self.refused = refused  # exit 2: the side does not model something the case uses


def read_outputs(out):
    with open(os.path.join(out, "requests.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    return rows, summary


def run_kvtier(files, mode="hitrate", extra=()):
    out = os.path.join(files.dir, "kvtier-" + mode)
    shutil.rmtree(out, ignore_errors=True)
    try:
        p = subprocess.run(kvtier_command(files, out, mode, extra), capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Outcome(error=f"kvtier did not finish in {RUN_TIMEOUT_S} s (a small case takes "
                             f"well under one)")
    if p.returncode == 2:
        return Outcome(refused=p.stderr.strip()[-400:])
    if p.returncode != 0:
        return Outcome(error=f"kvtier exit {p.returncode}: {p.stderr.strip()[-600:]}")
    rows, summary = read_outputs(out)
    return Outcome(rows, summary)


_reference_module = None


def reference_module():
    """The reference, imported once (cases run in this process); None if it is not importable."""
    global _reference_module
    if _reference_module is None:
        if not os.path.exists(REFERENCE):
            raise SystemExit(f"difftest: no reference model at {REFERENCE}")
        spec = importlib.util.spec_from_file_location("kvtier_ref", REFERENCE)
        mod = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(REFERENCE))
        spec.loader.exec_module(mod)
        _reference_module = mod
    return _reference_module


def run_reference(files):
    """Runs the reference's command line in this process (its main with an argv), so that many
    cases share one interpreter."""
    out = os.path.join(files.dir, "reference")
    shutil.rmtree(out, ignore_errors=True)
    argv = ["--config", files.config]
    for t in files.traces:
        argv += ["--trace", t]
    argv += ["--out", out]
    mod = reference_module()
    err = io.StringIO()
    saved = sys.stderr
    sys.stderr = err
    try:
        code = mod.main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except Exception as e:  # a crash of the reference is a finding too
        sys.stderr = saved
        return Outcome(error=f"reference raised {type(e).__name__}: {e}")
    finally:
        sys.stderr = saved
    if code == 2:
        return Outcome(refused=err.getvalue().strip()[-400:])
    if code:
        return Outcome(error=f"reference exit {code}: {err.getvalue().strip()[-600:]}")
    rows, summary = read_outputs(out)
    return Outcome(rows, summary)


def dig(d, path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def compare(a, b, names=("kvtier", "reference"), columns=COLUMNS, summary_keys=SUMMARY_KEYS):
    """The first difference between two outcomes, in words, or None."""
    if a.error or b.error:
        return a.error or b.error
    if len(a.rows) != len(b.rows):
        return f"{names[0]} has {len(a.rows)} requests, {names[1]} {len(b.rows)}"
    for ra, rb in zip(a.rows, b.rows):
        for c in columns:
            if c in ra and c in rb and ra[c] != rb[c]:
                return (f"request seq {ra.get('seq')} (file {ra.get('file')} line "
                        f"{ra.get('line')}): {c} {names[0]} {ra[c]}, {names[1]} {rb[c]}")
    for path in summary_keys:
        x, y = dig(a.summary, path), dig(b.summary, path)
        if x is None or y is None:
            continue
        if isinstance(x, float) or isinstance(y, float):
            same = abs(float(x) - float(y)) <= 1.5e-6
        else:
            same = x == y
        if not same:
            return f"summary {'.'.join(path)}: {names[0]} {x}, {names[1]} {y}"
    return None
