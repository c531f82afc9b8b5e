"""EVOLVE-block markers (the grammar is cuco.evolve_blocks): the regions a search may rewrite (kernels,
communication/pipeline code); everything outside them (setup, teardown, verification) is frozen."""

from __future__ import annotations

import re

from cuco import evolve_blocks
from cuco.fastpath.model import FastPathError

START = evolve_blocks.START_LINE
END = evolve_blocks.END_LINE


def marker_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line, 'start'|'end') of every marker; raises FastPathError for one that is not on its own line."""
    try:
        return [(m.line, m.kind.lower()) for m in evolve_blocks.markers(text)]
    except evolve_blocks.BlockError as exc:
        raise FastPathError(str(exc)) from None


def check_markers(text: str) -> int:
    """Number of blocks; raises FastPathError when markers are unbalanced or nested."""
    try:
        return len(evolve_blocks.split(text, require=False).blocks)
    except evolve_blocks.BlockError as exc:
        raise FastPathError(str(exc)) from None


def wrap(text: str, label: str = "") -> str:
    """`text` (whole lines) inside one block."""
    return evolve_blocks.wrap(text, label)


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
