"""Number and table formatting of the study pages (tools/study_pages.py and its page modules)."""
import re

GB = 1e9


def num(row, key):
    v = row.get(key)
    return None if v is None or v == "" else float(v)


def fmt(v, digits=0, thousands=True):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}" if thousands else f"{v:.{digits}f}"


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def link_sum(row, pattern):
    """Bytes (GB) over the links whose flattened column matches `pattern` (traffic.links.*)."""
    total = None
    for k, v in row.items():
        if re.fullmatch(pattern, k) and v not in (None, ""):
            total = (total or 0.0) + float(v)
    return None if total is None else total / GB
