"""One workload shape through `cuco run` (fast path + directive search), as a results row: shared by the
benchmark scripts (benchmarks/moe.py, benchmarks/attention_cp.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def history(run_dir: Path, workload: str) -> list[dict[str, Any]]:
    """Evaluations of a run in order: point, status, time."""
    from cuco.db import CandidateDB

    db = CandidateDB(run_dir / "candidates.db")
    try:
        cands = sorted(db.all(workload), key=lambda c: c.created_at)
    finally:
        db.close()
    return [{"point": c.directives.label() if c.directives else c.mutation, "status": c.status,
             "ms": c.metrics.get("time_ms"), "reason": "" if c.status == "passed" else
             next((x.reason for x in c.results.values() if not x.passed), "")[:400]} for c in cands]


def search_row(workload: str, name: str, world: int, evals: int, runs: Path) -> dict[str, Any]:
    """Search shape `name` of `workload` at `world` ranks with `evals` evaluations; the row holds the best
    candidate's times and the bound parts (all from one harness process), the fast path and every evaluation."""
    from cuco.pipeline import RunOptions, run_workload
    from cuco.workloads import get

    shape = get(workload).parse_shape(name)
    run_dir = runs / f"{workload}-{name}-w{world}-{int(time.time())}"
    start = time.monotonic()
    opts = RunOptions(workload=workload, world=world, shape=name, evaluations=evals, run_dir=str(run_dir),
                      progress=False, batch_size=8, islands=2)
    summary = run_workload(opts, on_event=lambda s: print(s, flush=True))
    print(summary.text(), flush=True)
    row: dict[str, Any] = {"shape": name, "dims": dict(zip(get(workload).dim_names, shape.dims)), "world": world,
                           "search_wall_s": round(time.monotonic() - start, 1), "evaluations": summary.evaluated,
                           "measured": summary.measured, "run_dir": str(run_dir)}
    best = summary.best
    if best is not None:
        m = best.metrics
        row.update(verified=best.status == "passed", best_point=best.directives.label() if best.directives
                   else best.mutation, best_ms=m.get("time_ms"), host_ms=m.get("host_ms"),
                   speedup=m.get("speedup"), compute_ms=m.get("compute_ms"), comm_ms=m.get("comm_ms"),
                   bound_ms=m.get("bound_ms"), overlap_efficiency=m.get("overlap_efficiency"),
                   spread=m.get("spread"), bench_shape=summary.environment.get("shape"),
                   **{k: v for k, v in summary.environment.items() if k != "shape"})
    if summary.fastpath is not None:
        row.update(fastpath_status=summary.fastpath.status, fastpath_ms=summary.fastpath.metrics.get("time_ms"),
                   fastpath_feedback=summary.fastpath.feedback[:400])
    row["evaluations_in_order"] = history(run_dir, workload)
    return row
