"""EVOLVE-BLOCK markers: the regions a search may rewrite (kernels, communication/pipeline code); everything
outside them (setup, teardown, verification) is frozen."""

from __future__ import annotations

import re

from cuco.fastpath.model import FastPathError

START = "// EVOLVE-BLOCK-START"
END = "// EVOLVE-BLOCK-END"


def marker_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line, 'start'|'end') of every marker."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith(START):
            out.append((i, "start"))
        elif s.startswith(END):
            out.append((i, "end"))
    return out


def check_markers(text: str) -> int:
    """Number of blocks; raises FastPathError when markers are unbalanced or nested."""
    depth, blocks = 0, 0
    for line, kind in marker_lines(text):
        if kind == "start":
            if depth:
                raise FastPathError(f"line {line}: EVOLVE-BLOCK-START inside an open block; blocks do not nest")
            depth = 1
        else:
            if not depth:
                raise FastPathError(f"line {line}: EVOLVE-BLOCK-END without EVOLVE-BLOCK-START")
            depth, blocks = 0, blocks + 1
    if depth:
        raise FastPathError("an EVOLVE-BLOCK-START is never closed")
    return blocks


def wrap(text: str, label: str = "") -> str:
    """`text` (whole lines) inside one block."""
    tag = f" {label}" if label else ""
    body = text if text.endswith("\n") else text + "\n"
    return f"{START}{tag}\n{body}{END}{tag}\n"


def line_ranges_to_edits(data: bytes, ranges: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Insertions (offset, offset, marker text) that wrap 1-based inclusive line ranges, merged when they overlap."""
    starts = [0] + [m.end() for m in re.finditer(rb"\n", data)]
    merged: list[list] = []
    for lo, hi, label in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
            continue
        merged.append([lo, hi, label])
    edits = []
    for lo, hi, label in merged:
        tag = f" {label}" if label else ""
        edits.append((starts[lo - 1], starts[lo - 1], f"{START}{tag}\n"))
        end = starts[hi] if hi < len(starts) else len(data)
        prefix = "" if end == 0 or data[end - 1:end] == b"\n" else "\n"
        edits.append((end, end, f"{prefix}{END}{tag}\n"))
    return edits
