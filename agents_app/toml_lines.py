"""Where a configuration path sits in a TOML text: the line an import error points to, so an
operator with a long file goes straight to it (the dashboard's import page)."""

from __future__ import annotations

import re

HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
KEY_RE = re.compile(r"^\s*([A-Za-z0-9_\-\".' ]+?)\s*=")


def _parts(dotted: str) -> list[str]:
    """`agents."my agent".delegates[0].agent` -> ["agents", "my agent", "delegates", "agent"]."""
    out: list[str] = []
    for found in re.finditer(r'"([^"]*)"|\'([^\']*)\'|([^."\']+)', dotted):
        part = found.group(1) if found.group(1) is not None else found.group(2) or found.group(3) or ""
        out.append(re.sub(r"\[\d+\]$", "", part.strip()))
    return [p for p in out if p]


def line_of(text: str, path: str) -> int | None:
    """The 1-based line that defines `path` (a key, or the table that should hold it): the
    line of the longest prefix of the path the text defines; None when nothing matches."""
    want = _parts(path)
    if not want:
        return None
    best: tuple[int, int] | None = None  # (matched parts, line)
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = HEADER_RE.match(line)
        if header:
            table = _parts(header.group(1))
            here = table
        elif key := KEY_RE.match(line):
            here = table + _parts(key.group(1))
        else:
            continue
        matched = 0
        for a, b in zip(here, want, strict=False):
            if a != b:
                break
            matched += 1
        if matched == len(here) and matched and (best is None or matched > best[0]):
            best = (matched, number)
    return best[1] if best else None
