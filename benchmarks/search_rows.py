"""One workload shape through `cuco run` (fast path + directive search), as a results row: shared by the
benchmark scripts (benchmarks/moe.py, benchmarks/attention_cp.py, benchmarks/kv_transfer.py), with the row fields
of a timed candidate and the tables' number format."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from record import search_costs

#: Proposals planned and evaluated together. An 8-evaluation search in one batch of 8 was open-loop: every
#: proposal was planned from the seed alone, so the exploit half stepped around the seed's point (ring attention
#: evaluated the same 8 points on every shape, three of them `deferred`, and never a neighbour of the winning
#: `stream_overlap` point). Two rounds of 4: the second steps around the first round's best.
SEARCH_BATCH = 4


def first_points(workload: str, world: int) -> tuple[str, ...]:
    """The points CUCO_FIRST_POINTS names (comma-separated labels) that are legal for `workload` at `world`: each
    search evaluates them right after the fast path (`cuco run --try`); an illegal one is said and left out."""
    from cuco.design_space import Topology
    from cuco.errors import CucoError
    from cuco.run import first_points as checked
    from cuco.workloads import get

    labels = [x.strip() for x in os.environ.get("CUCO_FIRST_POINTS", "").split(",") if x.strip()]
    space = get(workload).space(Topology(world=world, nodes=1, gin_available=False))
    legal = []
    for label in labels:
        try:
            checked((label,), space)  # the run's own check, one label at a time
        except CucoError as exc:
            print(f"CUCO_FIRST_POINTS: left out at world {world}: {exc}", flush=True)
            continue
        legal.append(label)
    return tuple(legal)


def history(run_dir: Path, workload: str) -> list[dict[str, Any]]:
    """Evaluations of a run in order: point, status, time."""
    from cuco.db import CandidateDB

    db = CandidateDB(run_dir / "candidates.db")
    try:
        cands = sorted(db.all(workload), key=lambda c: c.created_at)
    finally:
        db.close()
    return [{"point": c.directives.label() if c.directives else c.mutation, "labelled": c.directives is not None,
             "status": c.status, "ms": c.metrics.get("time_ms"), "reason": "" if c.status == "passed" else
             next((x.reason for x in c.results.values() if not x.passed), "")[:400]} for c in cands]


def timed_points(row: dict[str, Any]) -> list[str]:
    """The design points a search row timed, fastest first (each once)."""
    timed = sorted((e for e in row.get("evaluations_in_order", []) if e["status"] == "passed" and e["ms"]
                    and e.get("labelled", True)), key=lambda e: e["ms"])
    return list(dict.fromkeys(e["point"] for e in timed))


def candidate_row(c: Any) -> dict[str, Any]:
    """A verified, timed candidate as row fields: its point, its times and bound parts, and the environment of the
    harness run that timed it."""
    m = c.metrics
    bench = c.results.get("bench")
    data = dict(bench.data) if bench is not None else {}
    return {"verified": c.status == "passed", "best_point": c.directives.label() if c.directives else c.mutation,
            "best_ms": m.get("time_ms"), "host_ms": m.get("host_ms"), "speedup": m.get("speedup"),
            "compute_ms": m.get("compute_ms"), "comm_ms": m.get("comm_ms"), "bound_ms": m.get("bound_ms"),
            "overlap_efficiency": m.get("overlap_efficiency"), "spread": m.get("spread"),
            "bench_shape": data.get("shape"),
            **{k: data.get(k) for k in ("device", "nccl_version", "cuda_runtime_version", "driver_version", "date",
                                         "world", "iters", "warmup", "runs")}}


def search_row(workload: str, name: str, world: int, evals: int, runs: Path, record: bool = True,
               search_shape: str | None = None, record_iters: int = 30, record_repeats: int = 3) -> dict[str, Any]:
    """Search shape `name` of `workload` at `world` ranks with `evals` evaluations; the row holds the best
    candidate's figures of record (`of_record`; record=False: the search's own times), the fast path, what the
    search cost and every evaluation. search_shape: rank the points at this (cheaper) shape instead, e.g. fewer
    layers of a deep stack, and take the figures of record at `name`. record_repeats: the least repeats of the
    figures of record."""
    from cuco.run import RunOptions, run_workload
    from cuco.workloads import get

    shape = get(workload).parse_shape(name)
    run_dir = runs / f"{workload}-{name}-w{world}-{int(time.time())}"
    start = time.monotonic()
    first = first_points(workload, world)
    opts = RunOptions(workload=workload, world=world, shape=search_shape or name, evaluations=evals,
                      run_dir=str(run_dir), progress=False, batch_size=SEARCH_BATCH, islands=2, first_points=first)
    summary = run_workload(opts, on_event=lambda s: print(s, flush=True))
    print(summary.text(), flush=True)
    row: dict[str, Any] = {"shape": name, "dims": dict(zip(get(workload).dim_names, shape.dims)), "world": world,
                           "search_wall_s": round(time.monotonic() - start, 1), "evaluations": summary.evaluated,
                           "measured": summary.measured, "run_dir": str(run_dir)}
    if search_shape:
        row["searched_at"] = search_shape
    if first:  # the search spent its first evaluations on these (CUCO_FIRST_POINTS), not on its own proposals
        row["first_points"] = list(first)
    row.update(search_costs(run_dir, workload, row["search_wall_s"]))
    if summary.best is not None:
        row.update(candidate_row(summary.best))
    if summary.fastpath is not None:
        row.update(fastpath_status=summary.fastpath.status, fastpath_ms=summary.fastpath.metrics.get("time_ms"),
                   fastpath_feedback=summary.fastpath.feedback[:400])
    row["evaluations_in_order"] = history(run_dir, workload)
    if record and summary.measured and summary.best is not None:
        try:
            row.update(of_record(workload, name, world, summary, iters=record_iters, repeats=record_repeats))
        except Exception as exc:  # the search's row stands; the missing record is said, not hidden
            row["record_error"] = f"{type(exc).__name__}: {exc}"[:1000]
    return row


#: How many of the search's best design points go on to the selection before the figures of record
#: (CUCO_RECORD_FINALISTS): the search ranks on one harness run per point, whose spread (up to 15 % at W = 2) is
#: wider than the gaps between its leaders, so its first was not always the fastest when re-timed (a W = 2
#: GEMM+AllGather row reported the fast path at 0.99x the host while a copy-engine point had run 1.06x in the same
#: search).
FINALISTS = int(os.environ.get("CUCO_RECORD_FINALISTS", "3"))


def finalists(candidates: list[Any], k: int) -> list[Any]:
    """The k best verified design points of a search by its own ranking (fitness, highest first), one candidate per
    point; the host seed ('original') and the fast path apart (the selection times them anyway)."""
    ranked = sorted((c for c in candidates if c.status == "passed" and c.fitness is not None
                     and c.mutation not in ("original", "fastpath")), key=lambda c: -c.fitness)
    out, seen = [], set()
    for c in ranked:
        label = program_label(c)
        if label not in seen:
            seen.add(label)
            out.append(c)
    return out[:k]


def of_record(workload: str, name: str, world: int, summary: Any, iters: int = 30, repeats: int = 3) -> dict[str, Any]:
    """The row's figures of record (benchmarks/record.py). First the selection: the search's FINALISTS best points,
    the fast path and the host seed timed together in interleaved repeats, the fastest chosen (the search's own
    first stays as `search_best_point`). Then the chosen program, fast path and host seed re-timed together on
    fresh full-entropy repeats; the search's own times stay as `search_*` fields. Where the chosen program is the
    host seed (point 'original': nothing beat it) or the fast path, best is that program's figure of the same
    repeats (for the host: speedup exactly 1.0), not a second timing of the same program."""
    from record import derived, retime, select_fastest

    fastpath = summary.fastpath if summary.fastpath is not None and summary.fastpath.status == "passed" else None
    # the programs a row may report as best, by label: the finalists, the fast path and the search's own first
    pool = {program_label(c): c for c in finalists(stored_candidates(summary.run_dir, workload), FINALISTS)}
    if fastpath is not None:
        pool["fastpath"] = fastpath
    if summary.best.mutation != "original":
        pool.setdefault(program_label(summary.best), summary.best)
    m = summary.best.metrics
    searched = {"search_best_ms": m.get("time_ms"), "search_host_ms": m.get("host_ms"),
                "search_speedup": m.get("speedup"), "search_best_point": program_label(summary.best)}
    selection = select_fastest(workload, name, world, {k: c.code for k, c in pool.items()}, iters=iters) \
        if pool else None
    chosen = selection["chosen"] if selection else "host"
    codes = {} if chosen in ("host", "fastpath") else {"best": pool[chosen].code}
    if fastpath is not None:
        codes["fastpath"] = fastpath.code
    rec = retime(workload, name, world, codes, repeats=repeats, iters=iters)
    if chosen in ("host", "fastpath"):
        for r in rec.get("per_repeat", []):  # the best's figure of each repeat is the chosen program's
            r["best_ms"] = r.get(f"{chosen}_ms")
        for suffix in ("", "_q"):
            figures = {k: rec.get(f"{k}{suffix}") for k in ("host_ms", "compute_ms", "comm_ms")}
            figures["best_ms"] = rec.get(f"{chosen}_ms{suffix}")
            rec[f"best_ms{suffix}"] = figures["best_ms"]
            rec.update({f"{k}{suffix}": v for k, v in derived(figures).items()})
    rec["best_point"] = "original" if chosen == "host" else chosen
    rec["verified"] = pool.get(chosen, summary.best).status == "passed" and rec["verified_full_entropy"]
    if selection is not None:
        rec["selection"] = {**selection, "finalists": list(pool)}
    return {**searched, **rec}


def stored_candidates(run_dir: Path, workload: str) -> list[Any]:
    """Every candidate a run stored, in insertion order."""
    from cuco.db import CandidateDB

    db = CandidateDB(Path(run_dir) / "candidates.db", readonly=True)
    try:
        return db.all(workload)
    finally:
        db.close()


def program_label(c: Any) -> str:
    """How a row names a candidate: its design point, else 'fastpath' or 'original' for those, else its id (an
    LLM's rewrite has no point, and two of them are two programs)."""
    if c.directives:
        return c.directives.label()
    return c.mutation if c.mutation in ("fastpath", "original") else c.id
