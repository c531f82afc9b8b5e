"""Figures of record for named points of a workload at one shape, without a search: the host seed and the named
points (`fastpath`, directive labels) re-timed together as every results row is (benchmarks/record.py: interleaved
repeats on full-entropy inputs, each one harness process). For a row whose search stands but whose re-timing was
cut off or failed, and to reproduce a failed re-timing with its order and every rank's last step in the message.

    python3 benchmarks/retime_points.py --workload gemm_allgather --world 2 --shape 16384,8192,3584 \\
        --points fastpath,lsa/stream_overlap/team/copy_engine/whole [--json out.json]

The first named point is `best` in the row, the fast path `fastpath`. Exit 1 when a repeat fails (its reason said).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from points import FAST_PATH, add_point_arguments, point_codes  # noqa: E402


def labelled(names: Sequence[str]) -> dict[str, str]:
    """Row label per point name: the fast path is `fastpath`, the first other point `best`, the rest their names.
    SystemExit for a name given twice or the seed (the host seed is always re-timed)."""
    if len(set(names)) != len(names):
        raise SystemExit(f"--points names a point twice: {','.join(names)}")
    if "seed" in names or "host" in names:
        raise SystemExit("--points: the host seed is always re-timed; name only the fast path and labels")
    out: dict[str, str] = {}
    for name in names:
        out[name] = FAST_PATH if name == FAST_PATH else ("best" if "best" not in out.values() else name)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_point_arguments(ap)
    ap.add_argument("--json", type=Path, default=None, help="the row, written here")
    a = ap.parse_args(argv)
    names = [p.strip() for p in a.points.split(",") if p.strip()]
    rows = labelled(names)
    if not rows:
        raise SystemExit("--points names no point")

    from cuco.workloads import get
    from record import retime

    codes = point_codes(get(a.workload), names)
    try:
        row: dict[str, Any] = retime(a.workload, a.shape, a.world, {rows[n]: codes[n] for n in names}, iters=a.iters)
    except RuntimeError as exc:
        print(f"retime_points: {exc}", flush=True)
        return 1
    row.update(shape=a.shape, world=a.world, points={v: k for k, v in rows.items()})
    text = json.dumps(row, indent=1, default=str)
    print(text, flush=True)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.json.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
