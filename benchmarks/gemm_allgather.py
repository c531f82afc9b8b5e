"""GEMM+AllGather on the GPU machine: per shape, the host baseline, the best point the offline search finds,
the bound, and torch's fused_all_gather_matmul; writes benchmarks/results/gemm_allgather_w<W>.{json,md} and the
search summary benchmarks/results/search_gemm_allgather_w<W>.json, figures of record as benchmarks/record.py says.

    PYTHONPATH=src python3 benchmarks/gemm_allgather.py --evals 32 --torch-json torch_anchor.json

Every time comes from the cuco harness (CUDA events on every rank, median of the timed iterations, max over
ranks); host, candidate and the parts that make the bound are timed in the same harness process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path
from typing import Any

from cuco.db import CandidateDB
from cuco.run import RunOptions, run_workload
from record import machine, record_lines, search_costs  # sibling scripts
from results_rows import newest_row, open_meta, save_meta, torch_rows
from search_rows import SEARCH_BATCH, first_points, of_record

RESULTS = Path(__file__).resolve().parent / "results"
# The six public shapes, then two where the GEMM is many times the AllGather alone.
SHAPES = ["8192,8192,8192", "16384,8192,3584", "4096,4096,4096", "32768,8192,8192", "12288,5120,5120",
          "2048,8192,28672", "8192,4096,28672", "4096,7168,18432"]


def _torch_rows(path: str | None) -> dict[tuple[int, int, int], dict[str, Any]]:
    return torch_rows(path, key=lambda r: (r.get("M"), r.get("K"), r.get("N")))


def _history(run_dir: Path, workload: str) -> dict[str, Any]:
    """Best fitness after each batch, time to best, evaluations per GPU-minute (from the run's database)."""
    db = CandidateDB(run_dir / "candidates.db")
    try:
        cands = sorted(db.all(workload), key=lambda c: c.created_at)
    finally:
        db.close()
    best, curve, t_best = None, [], None
    t0 = cands[0].created_at if cands else 0.0
    for i, c in enumerate(cands):
        if c.fitness is not None and c.status == "passed" and (best is None or c.fitness > best):
            best, t_best = c.fitness, c.created_at - t0
        curve.append({"evaluation": i + 1, "best_fitness": best})
    gpu_s = sum(c.results[lv].seconds for c in cands for lv in ("verify", "bench") if lv in c.results)
    timed = sorted((c for c in cands if c.status == "passed" and c.metrics.get("time_ms")),
                   key=lambda c: c.metrics["time_ms"])
    ranking = [{"point": c.directives.label() if c.directives else c.mutation, "ms": c.metrics["time_ms"],
                "speedup": c.metrics.get("speedup"), "spread": c.metrics.get("spread")} for c in timed]
    return {"evaluations": len(cands), "ranking_by_time": ranking, "best_fitness_curve": curve, "seconds_to_best_from_start": t_best,
            "gpu_seconds_in_harness": gpu_s,
            "evaluations_per_gpu_minute": (len(cands) / (gpu_s / 60.0)) if gpu_s else None,
            "failed": sum(1 for c in cands if c.failed),
            "failures": [{"point": c.directives.label() if c.directives else c.mutation, "status": c.status,
                          "reason": next((r.reason for r in c.results.values() if not r.passed), "")[:300]}
                         for c in cands if c.failed]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--evals", type=int, default=32)
    ap.add_argument("--world", type=int, default=2, help="ranks, one GPU each")
    ap.add_argument("--shapes", default=";".join(SHAPES), help="';'-separated M,K,N list")
    ap.add_argument("--torch-json", default=None, help="output of benchmarks/torch_anchor.py")
    ap.add_argument("--runs", default="/tmp/cuco-bench-runs")
    ap.add_argument("--out", default=str(RESULTS), help="folder for the results files")
    ap.add_argument("--no-record", dest="record", action="store_false",
                    help="keep the search's own times (no re-timed figures of record)")
    args = ap.parse_args()
    torch_rows = _torch_rows(args.torch_json)
    env = machine(args.world)
    # Rows and searches of other shapes from earlier calls stay (a file may be filled by several device calls).
    kept = open_meta(Path(args.out) / f"gemm_allgather_w{args.world}.json", args.world)
    old_search = Path(args.out) / f"search_gemm_allgather_w{args.world}.json"
    searches_kept = json.loads(old_search.read_text()).get("searches", []) if old_search.exists() and kept["rows"] else []
    named = set(args.shapes.split(";"))
    rows = [r for r in kept["rows"] if r.get("shape") not in named]
    searches = [x for x in searches_kept if x.get("shape") not in named]
    for shape in args.shapes.split(";"):
        run_dir = Path(args.runs) / f"gemm_allgather-{shape.replace(',', 'x')}-{int(time.time())}"
        start = time.monotonic()
        first = first_points("gemm_allgather", args.world)
        opts = RunOptions(workload="gemm_allgather", world=args.world, shape=shape, evaluations=args.evals,
                          run_dir=str(run_dir), progress=False, batch_size=SEARCH_BATCH, first_points=first)
        summary = run_workload(opts, on_event=lambda s: print(s, flush=True))
        wall = time.monotonic() - start
        print(summary.text(), flush=True)
        m, k, n = (int(x) for x in shape.split(","))
        best = summary.best
        row: dict[str, Any] = {"M": m, "K": k, "N": n, "world": args.world, "search_wall_s": round(wall, 1),
                               "evaluations": summary.evaluated, "measured": summary.measured}
        if first:  # the search spent its first evaluations on these (CUCO_FIRST_POINTS)
            row["first_points"] = list(first)
        if best is not None:
            bm = best.metrics
            row.update(best_point=best.directives.label() if best.directives else best.mutation,
                       best_ms=bm.get("time_ms"), host_ms=bm.get("host_ms"), speedup=bm.get("speedup"),
                       compute_ms=bm.get("compute_ms"), comm_ms=bm.get("comm_ms"), bound_ms=bm.get("bound_ms"),
                       overlap_efficiency=bm.get("overlap_efficiency"), spread=bm.get("spread"),
                       verified=best.status == "passed", **summary.environment)
        if summary.fastpath is not None:
            row["fastpath_status"] = summary.fastpath.status
            row["fastpath_ms"] = summary.fastpath.metrics.get("time_ms")
        row["shape"] = shape
        row.update(search_costs(run_dir, "gemm_allgather", wall))
        if summary.measured and best is not None and args.record:
            try:
                row.update(of_record("gemm_allgather", shape, args.world, summary))
            except Exception as exc:  # the search's row stands; the missing record is said, not hidden
                row["record_error"] = f"{type(exc).__name__}: {exc}"[:1000]
        t = torch_rows.get((m, k, n))
        if t:
            row.update(torch_fused_ms=t["torch_fused_ms"], torch_host_ms=t["torch_host_ms"],
                       torch=t.get("torch"), torch_device=t.get("torch_device"))
            if row.get("best_ms"):
                row["faster_than_torch_fused"] = row["best_ms"] < t["torch_fused_ms"]
        rows.append(row)
        searches.append({"shape": shape, "device": row.get("device"), "date": row.get("date"),
                         **_history(run_dir, "gemm_allgather"), "search_wall_s": round(wall, 1)})
        _write(Path(args.out), rows, searches, args.world, env)  # after every shape: a cut-off run keeps the rest


def _write(out: Path, rows: list[dict[str, Any]], searches: list[dict[str, Any]], world: int,
           env: dict[str, Any]) -> None:
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "world": world,
            "note": "times in ms: median over timed iterations, max over ranks; host, best and parts from the same "
                    "harness run", "rows": rows, "machine": env}
    out.mkdir(parents=True, exist_ok=True)
    tag = f"gemm_allgather_w{world}"   # one file per world size: W = 2 and W = 4 never overwrite each other
    meta = save_meta(out / f"{tag}.json", meta)  # merged with rows another lane wrote meanwhile
    env_row = newest_row(rows)
    (out / f"search_{tag}.json").write_text(json.dumps({"date": meta["date"], "device": env_row.get("device"),
                                                        "nccl_version": env_row.get("nccl_version"), "world": world,
                                                        "searches": searches}, indent=2))
    (out / f"{tag}.md").write_text(_table(meta) + "\n".join(record_lines(meta)) + "\n")
    print(_table(meta), flush=True)


def _fmt(v: Any, nd: int = 3) -> str:
    return f"{v:.{nd}f}" if isinstance(v, (int, float)) and v is not None else "—"


def _table(meta: dict[str, Any]) -> str:
    rows = meta["rows"]
    env = newest_row(rows)
    world = rows[0]["world"] if rows else "?"
    out = [f"# GEMM+AllGather, world {world} — {env.get('device', '?')}, NCCL {env.get('nccl_version', '?')}, "
           f"CUDA runtime {env.get('cuda_runtime_version', '?')}, {meta['date']}", "",
           "| M,K,N | host AG→GEMM | best (cuco) | speedup | GEMM | AG | bound | overlap eff. | torch fused | "
           "verified | best point |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['M']},{r['K']},{r['N']} | {_fmt(r.get('host_ms'))} | {_fmt(r.get('best_ms'))} | "
                   f"{_fmt(r.get('speedup'))} | {_fmt(r.get('compute_ms'))} | {_fmt(r.get('comm_ms'))} | "
                   f"{_fmt(r.get('bound_ms'))} | {_fmt(r.get('overlap_efficiency'), 2)} | "
                   f"{_fmt(r.get('torch_fused_ms'))} | {r.get('verified', False)} | `{r.get('best_point', '—')}` |")
    out += ["", "Times in ms (median of timed iterations, max over ranks). Host, best and the parts of the bound "
            "(GEMM alone, NCCL AllGather alone) come from the same harness run; torch's op from "
            "benchmarks/torch_anchor.py in the same device session.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    main()
