"""Compare a new results JSON with the committed one; flag every figure more than 5% worse (exit 1).

    python benchmarks/compare.py benchmarks/results/gemm_allgather.json new.json [--threshold 0.05]

Rows (the JSON's "rows", or the top-level list) are matched on their shape and world size. Figures: every
`*_ms` (lower is better) except anchors measured from other libraries (`torch_*`, `anchor_*`), `speedup` and
`*_tflops` (higher is better), and `verified` (true must stay true). Rows only in one file are listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

KEY_FIELDS = ("shape", "M", "K", "N", "world", "r", "skew", "name")
ANCHOR_PREFIXES = ("torch_", "anchor_")
HIGHER_IS_BETTER = ("speedup",)


def _rows(data: Any) -> list[dict]:
    rows = data.get("rows", []) if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SystemExit("a results file holds a list of row objects (or {'rows': [...]})")
    return rows


def _key(row: dict) -> tuple:
    return tuple((k, row[k]) for k in KEY_FIELDS if k in row)


def _direction(name: str, value: Any) -> int:
    """-1: lower is better, +1: higher is better, 0: not a compared figure."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or name.startswith(ANCHOR_PREFIXES):
        return 0
    if name.endswith("_ms"):
        return -1
    if name in HIGHER_IS_BETTER or name.endswith("_tflops"):
        return 1
    return 0


def compare(old: Any, new: Any, threshold: float = 0.05) -> tuple[list[str], list[str]]:
    """(regressions, notes): one line per figure more than `threshold` worse, and per unmatched row."""
    old_rows, new_rows = {_key(r): r for r in _rows(old)}, {_key(r): r for r in _rows(new)}
    worse, notes = [], []
    for key, before in old_rows.items():
        label = ",".join(f"{k}={v}" for k, v in key) or "row"
        after = new_rows.get(key)
        if after is None:
            notes.append(f"{label}: not in the new results")
            continue
        if before.get("verified") is True and after.get("verified") is not True:
            worse.append(f"{label}: verified was true, now {after.get('verified')!r}")
        for name, was in before.items():
            sign, now = _direction(name, was), after.get(name)
            if not sign or not isinstance(now, (int, float)) or isinstance(now, bool) or was == 0:
                continue
            change = (now - was) / abs(was)
            if -sign * change > threshold:
                worse.append(f"{label}: {name} {was:.4g} -> {now:.4g} ({change:+.1%})")
    notes += [f"{','.join(f'{k}={v}' for k, v in key)}: new row" for key in new_rows if key not in old_rows]
    return worse, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("committed", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--threshold", type=float, default=0.05, help="relative worsening that counts (0.05 = 5%%)")
    args = ap.parse_args(argv)
    worse, notes = compare(json.loads(args.committed.read_text()), json.loads(args.new.read_text()), args.threshold)
    for line in notes:
        print("note:", line)
    for line in worse:
        print("WORSE:", line)
    print(f"{len(worse)} figure(s) more than {args.threshold:.0%} worse")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
