"""Delta debugging (Zeller's ddmin) of a failing case: fewer requests, then fewer blocks per
request, then smaller tiers, while the failure stays. `fails(case)` says whether a case still
fails; the result is a case no single removal of a request or a block keeps failing."""

import copy


def ddmin(items, fails):
    """A 1-minimal sublist of `items` for which fails(sublist) holds (fails(items) must)."""
    n = 2
    while len(items) >= 2:
        size = max(1, len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        reduced = False
        for i in range(len(chunks)):
            rest = [x for j, c in enumerate(chunks) if j != i for x in c]
            if rest and fails(rest):
                items, n, reduced = rest, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


def _with_lines(case, chosen):
    """`case` keeping the request lines `chosen` names as (file, index)."""
    c = copy.deepcopy(case)
    keep = set(chosen)
    for f, t in enumerate(c["traces"]):
        t["lines"] = [line for i, line in enumerate(t["lines"]) if (f, i) in keep]
    c["traces"] = [t for t in c["traces"] if t["lines"]] or c["traces"][:1]
    return c


def _line_units(line, header):
    """The units a line's blocks are made of, and the tokens each unit holds."""
    if "block_hashes" in line:
        return "block_hashes", header.get("block_size", 1)
    if "tokens" in line:
        return "tokens", 1
    return None, None


def _shrink_lines(case, fails):
    for f in range(len(case["traces"])):
        header = case["traces"][f]["header"]
        for i in range(len(case["traces"][f]["lines"])):
            line = case["traces"][f]["lines"][i]
            key, unit = _line_units(line, header)
            if key is None:
                continue
            idx = list(range(len(line[key])))

            def with_units(kept, f=f, i=i, key=key, unit=unit):
                c = copy.deepcopy(case)
                ln = c["traces"][f]["lines"][i]
                old = ln[key]
                ln[key] = [old[k] for k in kept]
                tail = ln["input_length"] - len(old) * unit if key == "block_hashes" else 0
                ln["input_length"] = max(1, len(kept) * unit + max(0, tail))
                if key == "tokens":
                    ln["input_length"] = len(kept)
                    if not kept:
                        return None
                return c

            def fails_units(kept):
                c = with_units(kept)
                return c is not None and fails(c)

            if len(idx) > 1:
                kept = ddmin(idx, fails_units)
                if len(kept) < len(idx):
                    case = with_units(kept)
    return case


def _shrink_config(case, fails):
    """Smaller tiers, one key at a time, while the case fails."""
    for key in ("cache.device_blocks", "cache.host_blocks", "storage.capacity_blocks"):
        value = case["config"].get(key)
        if not isinstance(value, int):
            continue
        for smaller in sorted({0, 1, 2, value // 2, value - 1}):
            if smaller >= value or (key == "cache.device_blocks" and smaller < 1):
                continue
            c = copy.deepcopy(case)
            c["config"][key] = smaller
            if fails(c):
                case = c
                break
    return case


def shrink(case, fails, budget=400):
    """The smallest failing case found within `budget` runs of fails()."""
    runs = [0]

    def counted(c):
        if runs[0] >= budget:
            return False
        runs[0] += 1
        return fails(c)

    lines = [(f, i) for f, t in enumerate(case["traces"]) for i in range(len(t["lines"]))]
    kept = ddmin(lines, lambda chosen: counted(_with_lines(case, chosen)))
    case = _with_lines(case, kept)
    case = _shrink_lines(case, counted)
    case = _shrink_config(case, counted)
    return case
