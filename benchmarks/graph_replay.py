"""CUDA-graph capture and replay of a workload's points at world size W: capture once, replay N times, check each.

    python benchmarks/graph_replay.py --workload kv_transfer --world 2 --out OUT.json [--shape S] [--points P ...]
                                      [--replays 20] [--delay-us 2000] [--timeout-s 120]

Points (default): the fast path's candidate, every best point recorded in `benchmarks/results/<workload>_w<W>.json`
(its rows' `best_point`, else the W = 1 file's), and the host-driven seed; `--points` names them instead (directive
labels, `fastpath`, `seed`). They are built through the cascade's own path (benchmarks/points.py, shared with
benchmarks/sanitize.py) and run in one harness process (thread mode) at the workload's verify shape: verified with
the communication path started `--delay-us` late, then one such delayed launch captured in a CUDA graph and replayed
`--replays` times, each replay with fresh inputs (a new seed), poisoned outputs and the workload's check on every
rank (the harness's `--graph-replays`).

Why: a graph freezes the host-side arguments of the captured launch, `ctx->iteration` among them. A candidate that
takes its flag epoch from it (kit/skeleton.cuh) waits for the same epoch on every replay; from the second replay on
its flags are already set, its consumer reads before the delayed writer has written, and the check fails. The
delay defaults to the cascade's verification delay (2 ms): long enough that a consumer that does not wait reads
poison at any verify shape, short enough that 20 replays cost well under a second.

Writes OUT.json (environment, settings, one entry per point) and prints a table: point, verify status, graph status,
failed replay, reason. Exit status: 0 when every point verified and its graph replays passed or it was not
capturable (a launch that synchronises cannot be captured: a property, recorded, not a wrong result); 1 when any
point's graph replay failed or broke (failed, error, hang, crash), or a point did not compile, verify or reach its
graph phase (then this run says nothing about it); 2 for a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from cuco import workloads  # noqa: E402
from cuco.harness.runner import HarnessRequest, run_harness  # noqa: E402
from points import FAST_PATH, RESULTS, SEED, best_points, build_points  # noqa: E402

#: Graph statuses that answer the question without finding a wrong result.
CLEAN = ("passed", "not_capturable")
#: A replay file times nothing (docs/measuring.md asks every results file for a spread or the reason it has none).
SPREAD_NOTE = "a correctness check (CUDA-graph replay); it times nothing, so there is no spread"


def default_points(workload: str, world: int, results: Path = RESULTS) -> list[str]:
    """The fast path, the recorded best points at `world` (else W = 1), the seed."""
    return [FAST_PATH, *best_points(workload, world, results), SEED]


def rows_of(points: list[str], built: list, result) -> list[dict]:
    """One row per point: compile outcome, the harness's verify status and the graph record."""
    runs = iter(result.candidates if result is not None else ())
    rows = []
    for point, outcome in built:
        if not outcome.ok:
            rows.append({"point": point, "compiled": False, "status": "compile_failed",
                         "message": outcome.log_excerpt[-600:], "graph": None})
            continue
        run = next(runs)
        rows.append({"point": point, "compiled": True, "status": run.status, "message": run.message,
                     "time_ms": run.time_ms, "graph": run.graph.to_dict() if run.graph else None})
    return rows


def clean(row: dict) -> bool:
    """The point verified and its graph replay passed, or it could not be captured."""
    g = row.get("graph") or {}
    return row["status"] == "ok" and g.get("status") in CLEAN


def table(rows: list[dict], reason_width: int = 100) -> str:
    """The rows as a Markdown table."""
    out = ["| point | verify | graph | failed replay | reason |", "|---|---|---|---|---|"]
    for r in rows:
        g = r.get("graph") or {}
        replay = g.get("failed_replay")
        seed = g.get("failed_seed")
        reason = g.get("reason") or (r["message"] if r["status"] != "ok" else "")
        reason = " ".join(str(reason).split())
        if len(reason) > reason_width:
            reason = reason[:reason_width - 3] + "..."
        out.append(f"| {r['point']} | {r['status']} | {g.get('status', '-')} | "
                   f"{'-' if replay is None else f'{replay} (seed {seed})'} | {reason.replace('|', '/')} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    ap.add_argument("--shape", default=None, help="default: the workload's first verify shape at W")
    ap.add_argument("--points", nargs="+", default=None,
                    help="directive labels, 'fastpath', 'seed' (default: the fast path, the recorded best points, "
                         "the seed)")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--delay-us", type=float, default=DEFAULT_VERIFY_DELAY_US,
                    help="the communication path starts this late in verification and in every replay")
    ap.add_argument("--seeds", default="1", help="verification seeds; replay i's seed derives from them")
    ap.add_argument("--timeout-s", type=float, default=120)
    args = ap.parse_args(argv)
    if args.replays < 1:
        ap.error("--replays must be >= 1")
    wl = workloads.get(args.workload)
    shape = wl.resolve_shape(args.shape, args.world, "verify")
    points = list(dict.fromkeys(args.points or default_points(args.workload, args.world)))
    seeds = tuple(int(s) for s in args.seeds.split(","))
    plugin, binary, built, toolchain = build_points(wl, points)
    sos = [outcome.so_path for _, outcome in built if outcome.ok]
    result = None
    if sos:
        request = HarnessRequest(plugin, sos, shape.dims, world=args.world, seeds=seeds, verify=True, bench=False,
                                 timeout_s=args.timeout_s, delay_comm_us=args.delay_us, graph_replays=args.replays)
        result = run_harness(request, toolchain, binary=binary)
    rows = rows_of(points, built, result)
    doc = {
        "workload": args.workload, "world": args.world, "shape": str(shape), "dims": list(shape.dims),
        "replays": args.replays, "delay_comm_us": args.delay_us, "seeds": list(seeds),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment": result.environment() if result else "",
        "device": result.device if result else "", "nccl_version": result.nccl_version if result else "",
        "driver": (result.driver_release or result.driver_version) if result else "",
        "harness_status": result.status if result else "not_run",
        "harness_message": result.message if result else "no point compiled",
        "points": rows,
        "spread": None, "spread_note": SPREAD_NOTE,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"# graph replay {args.workload} W={args.world} shape {shape}: {args.replays} replays, "
          f"communication delayed {args.delay_us:g} us")
    print(f"# device {doc['device'] or '?'}, NCCL {doc['nccl_version'] or '?'}, driver {doc['driver'] or '?'}, "
          f"{doc['date']}")
    if doc["harness_status"] != "ok":
        print(f"# harness: {doc['harness_status']}: {' '.join(str(doc['harness_message']).split())[:300]}")
    print(table(rows))
    ok = bool(rows) and all(clean(r) for r in rows)
    print(f"graph replay {args.workload}_w{args.world}:", "clean" if ok else "failures (see the table and "
          f"{args.out})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
