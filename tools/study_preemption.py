"""The tables of docs/studies/preemption.md (tools/study_pages.py, page `preemption`): the
preemption, preemption-decode and prefetch studies."""
from study_format import GB, fmt, md_table, num


def seconds(r, key):
    v = num(r, key)
    return None if v is None else v / 1000


def s_pair(r, a, b, digits=2):
    return fmt(seconds(r, a), digits) + " / " + fmt(seconds(r, b), digits)


def gb(r, key):
    v = num(r, key)
    return None if v is None else v / GB


def preemption_label(r):
    return f"{r.get('cache.write_policy')}: {r.get('scheduler.preemption')}"


def preemption_modes_table(results):
    rows = []
    lat = "preemption.latency_ms."
    for r in results["preemption"]:
        restored = " / ".join(fmt(num(r, f"preemption.restored_tokens.{t}"))
                              for t in ("device", "host", "storage"))
        rows.append([preemption_label(r), fmt(num(r, "preemption.count")),
                     fmt(num(r, "preemption.requests")),
                     fmt(num(r, "preemption.recomputed_tokens")), restored,
                     s_pair(r, lat + "preempted.ttft.p50", lat + "preempted.ttft.p99"),
                     s_pair(r, lat + "preempted.e2e.p50", lat + "preempted.e2e.p99"),
                     s_pair(r, lat + "not_preempted.ttft.p50", lat + "not_preempted.ttft.p99"),
                     fmt(seconds(r, lat + "not_preempted.e2e.p50"), 2),
                     fmt(seconds(r, "latency_ms.ttft.p50"), 2),
                     fmt(num(r, "requests.finished")), fmt(num(r, "requests.rejected")),
                     fmt(num(r, "invariants.violations"))])
    return md_table(["write policy: mode", "preemptions", "preempted requests",
                     "recomputed tokens", "restored device / host / storage tokens",
                     "TTFT p50 / p99 preempted (s)", "e2e p50 / p99 preempted (s)",
                     "TTFT p50 / p99 others (s)", "e2e p50 others (s)", "all TTFT p50 (s)",
                     "finished", "rejected", "invariant violations"], rows)


def preemption_costs_table(results):
    rows = []
    for r in results["preemption"]:
        rows.append([preemption_label(r), fmt(gb(r, "traffic.d2h_bytes"), 1),
                     fmt(gb(r, "preemption.d2h_bytes"), 1),
                     fmt(gb(r, "preemption.marginal_d2h_bytes"), 1),
                     fmt(gb(r, "preemption.storage_write_bytes"), 1),
                     fmt(gb(r, "preemption.marginal_storage_write_bytes"), 1),
                     fmt(num(r, "preemption.named_blocks"))])
    return ("Bytes in GB (10^9).\n\n" + md_table(
        ["write policy: mode", "`traffic.d2h_bytes`", "`preemption.d2h_bytes`",
         "`preemption.marginal_d2h_bytes`", "`preemption.storage_write_bytes`",
         "`preemption.marginal_storage_write_bytes`", "`preemption.named_blocks`"], rows))


def preemption_decode_table(results):
    rows = []
    drops = "pd.decode_drops."
    lat = "preemption.latency_ms."
    for r in results["preemption-decode"]:
        restored = " / ".join(fmt(num(r, f"{drops}reprefill_restored_tokens.{t}"))
                              for t in ("device", "storage"))
        rows.append([f"{r.get('decode_device')}: {r.get('scheduler.preemption')}",
                     fmt(num(r, drops + "dropped")), fmt(num(r, drops + "saved")),
                     fmt(num(r, drops + "saved_blocks")),
                     fmt(gb(r, "preemption.d2h_bytes"), 1) + " / "
                     + fmt(gb(r, "preemption.storage_write_bytes"), 1),
                     fmt(num(r, drops + "write_wait_s"), 2),
                     fmt(num(r, drops + "reprefill_computed_tokens")), restored,
                     s_pair(r, lat + "preempted.e2e.p50", lat + "preempted.e2e.p99"),
                     fmt(seconds(r, lat + "not_preempted.e2e.p50"), 2),
                     s_pair(r, "latency_ms.ttft.p50", "latency_ms.ttft.p99"),
                     fmt(num(r, "latency_ms.tpot.p50"), 2) + " / "
                     + fmt(num(r, "latency_ms.tpot.p99"), 2),
                     fmt(num(r, "requests.finished")), fmt(num(r, "requests.rejected")),
                     fmt(num(r, "invariants.violations"))])
    return md_table(["D device tokens: mode", "drops", "drops written first", "blocks written",
                     "D2H / storage GB", "summed drop-to-visible wait (s)",
                     "re-prefill computed tokens", "re-prefill restored device / storage tokens",
                     "e2e p50 / p99 dropped (s)", "e2e p50 others (s)", "TTFT p50 / p99 all (s)",
                     "TPOT p50 / p99 (ms)", "finished", "rejected", "invariant violations"], rows)


def prefetch_table(results):
    rows = []
    pf = "prefetch."
    for r in results["prefetch"]:
        pair = lambda a, b: fmt(num(r, pf + a)) + " / " + fmt(num(r, pf + b))
        rows.append([f"{r.get('trace.time_scale')}: {r.get('prefetch')}",
                     fmt(num(r, "hit_ratio.by_tier.storage.tokens"), 4, False),
                     fmt(num(r, "hits.blocks.storage")),
                     fmt(gb(r, "traffic.storage_read_bytes"), 1), fmt(num(r, pf + "started")),
                     pair("ready_early", "timeouts"), fmt(num(r, pf + "below_threshold")),
                     pair("protected_holds", "protected_released"),
                     fmt(num(r, pf + "wasted_blocks")), fmt(num(r, "transfers.failed_loads")),
                     fmt(num(r, "evictions.host")),
                     s_pair(r, "latency_ms.ttft.p50", "latency_ms.ttft.p99"),
                     fmt(seconds(r, "latency_ms.e2e.p50"), 2),
                     "yes" if r.get("load.overloaded") in (True, "true") else "no"])
    return md_table(["`trace.time_scale`: policy", "storage hit ratio (tokens)",
                     "storage hit blocks", "storage read GB", "prefetches",
                     "ready early / timeouts", "below threshold", "protected holds / released",
                     "wasted blocks", "failed loads", "host evictions", "TTFT p50 / p99 (s)",
                     "e2e p50 (s)", "overloaded"], rows)
