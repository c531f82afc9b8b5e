"""Named points of a workload timed side by side at one shape: the host seed and every point (`fastpath` or
directive labels) in one harness process per repeat, interleaved repeats (the order reversed every other one), the
first verified, on full-entropy inputs, every rank waited on; per-point medians over the repeats, the parts
(compute alone, communication alone) beside them. For comparing design points, not for figures of record
(benchmarks/record.py re-times a row's chosen point on fresh repeats).

    python3 benchmarks/compare_points.py --workload moe --world 2 --shape paper-r1 \\
        --points lsa/stream_overlap/signal/warp/whole/dispatch_dtype=bf16,fastpath [--repeats 3] [--json out.json]

Exit 1 when a repeat fails (its reason said) or a point does not verify.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from points import add_point_arguments, point_codes, point_names  # noqa: E402


def medians(runs: list[dict[str, Any]], labels: Sequence[str]) -> dict[str, float | None]:
    """Per label (and the parts), the median of its per-repeat times; None where no repeat timed it."""
    out: dict[str, float | None] = {}
    for key in [*labels, "compute", "comm"]:
        values = [r[f"{key}_ms"] for r in runs if r.get(f"{key}_ms") is not None]
        out[key] = statistics.median(values) if values else None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_point_arguments(ap)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    names = point_names(a.points)
    if a.repeats < 1:
        raise SystemExit("--repeats must be at least 1")

    from cuco.workloads import get
    from record import _built, _one_run, source_commit

    ev, sos = _built(a.workload, a.shape, a.world, point_codes(get(a.workload), names), "comparing at")
    labels = list(sos)
    runs = []
    for i in range(a.repeats):
        order = labels if i % 2 == 0 else labels[::-1]
        run = _one_run(ev, sos, order, "full", i == 0, a.iters)
        if run["failures"]:
            print(f"compare_points: repeat {i + 1} failed: {run['failures']}", flush=True)
            return 1
        runs.append(run)
    row = {"workload": a.workload, "shape": a.shape, "world": a.world, "repeats": a.repeats, "inputs": "full",
           "statuses": runs[0]["status"], "medians_ms": medians(runs, labels),
           "per_repeat_ms": [{k: r.get(f"{k}_ms") for k in [*labels, "compute", "comm"]} for r in runs],
           "device": runs[0]["device"], "nccl_version": runs[0]["nccl_version"], "date": runs[0]["date"],
           "commit": source_commit()}
    text = json.dumps(row, indent=1)
    print(text, flush=True)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(text)
    return 0 if all(s == "ok" for s in row["statuses"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
