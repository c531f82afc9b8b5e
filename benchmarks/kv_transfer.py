"""KV-cache transfer (prefill -> decode) on the GPU machine at W ranks (default 1): per shape, the host baseline, the fast path and the
best point of an offline directive search (every time from the harness, host and parts in the same process), then
the best point's transfer path alone (its layer compute switched off) for copy_gbps.

    PYTHONPATH=src python3 benchmarks/kv_transfer.py --shapes s2048-kv512,... --out benchmarks/results [--evals 6] \
        [--world 2]

The long prompt ('long', S = 32768) is not searched: the best points of s4096-kv1024 from the same results file (or
of this call) and the fast path's candidate are re-timed there through the cascade with fewer iterations (one launch
takes about a second).
Rows are merged into benchmarks/results/kv_transfer_w<W>.json by shape, so the shapes may be measured in several calls.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record import fmt, machine, paired_difference, record_lines  # noqa: E402  (a sibling script)
from results_rows import merge_torch, newest_row, save_meta, torch_rows  # noqa: E402  (a sibling script)
from search_rows import candidate_row, search_row, timed_points  # noqa: E402  (a sibling script)

RESULTS = HERE / "results"
SWEEP = [f"s{s}-kv{kv}" for s in (2048, 3072, 4096) for kv in (512, 768, 1024)]
LONG_FROM = "s4096-kv1024"
#: Short prompts: their rows go to `small_rows`, apart from the sweep's (their goal: never slower than the host seed).
SMALL = ["s256-kv1024"]
#: Least repeats of a row's figures of record: the exposed transfer is a small difference of two large times.
RECORD_REPEATS = 5
#: The exposed transfer may be at most this share of the transfer alone...
EXPOSED_GOAL = 0.25
#: ...and is resolved only where its 95 % confidence half-width is at most this share of it.
RESOLUTION_SHARE = 0.1
#: Pages per rank (K and V, all layers) at least, where the transfer path alone is timed for copy_gbps: the sweep's
#: S = 2048 rows have 8192 at their 32 layers, so theirs is timed with 40.
COPY_PAGES = 10_000


def table_of(name: str) -> str:
    """The results file's list a shape's row belongs to: `small_rows` for a short prompt, else `rows`."""
    return "small_rows" if name in SMALL else "rows"


def searched(name: str, evals: int, runs: Path, world: int, rank_layers: int = 0,
             record_iters: int = 30) -> tuple[dict[str, Any], list[str]]:
    """The directive search at `name`: its row, and its timed points fastest first. rank_layers > 0: the points are
    ranked on a stack of that many layers (one evaluation of 32 layers at S = 4096 takes seconds; the per-layer
    schedule, which decides the ranking, is the same), and the figures of record are taken at `name`."""
    from cuco.workloads.kv_transfer import shapes as kv_shapes

    s, kv, layers = kv_shapes.parse(name).dims
    cheaper = f"{s},{kv},{rank_layers}" if 0 < rank_layers < layers else None
    row = search_row("kv_transfer", name, world, evals, runs, search_shape=cheaper, record_iters=record_iters,
                     record_repeats=RECORD_REPEATS)
    row.update(exposure(row))
    return row, timed_points(row)


def exposure(r: dict[str, Any]) -> dict[str, Any]:
    """The transfer left exposed, best - compute, as the mean of its per-repeat (paired) differences with the 95 %
    confidence half-width, and the verdict: 'hidden' (at most EXPOSED_GOAL of comm), 'exposed', or 'below resolution'
    where the half-width exceeds RESOLUTION_SHARE of comm (the timeline must show the hiding then); {} where the row
    has no per-repeat figures or no comm."""
    diff, comm = paired_difference(r.get("per_repeat", []), "best_ms", "compute_ms"), r.get("comm_ms")
    if diff is None or not comm:
        return {}
    mean, half = diff
    verdict = ("below resolution" if half > RESOLUTION_SHARE * comm else
               "hidden" if mean <= EXPOSED_GOAL * comm else "exposed")
    return {"exposed_ms": mean, "exposed_ci95_ms": half, "exposure": verdict}


def retimed(name: str, labels: list[str], iters: int, world: int) -> dict[str, Any]:
    """`labels` and the fast path's candidate through the cascade at `name` (verified, then timed with the host
    seed and the parts); the faster of them is the row's best, the fast path's status and time are its own fields."""
    import tempfile

    from cuco.candidate import Candidate
    from cuco.design_space import Directives, Topology
    from cuco.evaluate.cascade import Evaluator
    from cuco.workloads import get

    w = get("kv_transfer")
    # Verified at the verify shapes on two seeds (the cascade's L2); the plugin's own check at S = 32768 runs its SIMT
    # reference attention over 32 layers (tens of seconds per candidate), so the timed run skips it.
    cascade = Evaluator(w, world=world, bench_shape=name, iters=iters, warmup=1, timeout_s=600.0, verify_at_bench=False)
    cands = [Candidate(code=w.render(Directives.from_label(p)), workload="kv_transfer",
                       directives=Directives.from_label(p), mutation="manual") for p in labels]
    fast = w.seed(Topology(world=world), Path(tempfile.mkdtemp(prefix="cuco-kv-long-")), lambda s: print(s, flush=True))
    done = cascade.evaluate([*cands, fast])
    out = [c for c in done if c.status == "passed" and c.metrics.get("time_ms")]
    row: dict[str, Any] = {"shape": name, "points_retimed": labels, "search": f"best points of {LONG_FROM}",
                           "fastpath_status": done[-1].status, "fastpath_ms": done[-1].metrics.get("time_ms")}
    if out:
        row.update(candidate_row(min(out, key=lambda c: c.metrics["time_ms"])),
                   verified_at="the verify shapes (two seeds), not at S = 32768")
    return row


def copy_shape(name: str) -> str:
    """The shape the transfer path of row `name` is timed at: its own, with layers added up to COPY_PAGES pages per
    rank for a goal row (a short prompt's row keeps its own: its goal is the host seed's time, not a rate)."""
    from cuco.workloads.kv_transfer import shapes as kv_shapes

    shape = kv_shapes.parse(name)
    if table_of(name) != "rows":
        return name
    more = kv_shapes.with_pages(shape, COPY_PAGES)
    return name if more == shape else ",".join(str(d) for d in more.dims)


def copy_gbps(name: str, label: str, iters: int, world: int) -> dict[str, Any]:
    """The best point's transfer path alone (render_transfer_path: compute off) at `copy_shape(name)`: KV bytes /
    its time."""
    from cuco.design_space import Directives
    from cuco.evaluate.cascade import Evaluator
    from cuco.harness.runner import HarnessRequest, run_harness
    from cuco.workloads import get
    from cuco.workloads.kv_transfer import render_transfer_path
    from cuco.workloads.kv_transfer import shapes as kv_shapes

    w = get("kv_transfer")
    name = copy_shape(name)
    cascade = Evaluator(w, world=world, bench_shape=name)  # only its build path: libraries, compute library, plugin
    link = cascade.link()
    (built,) = cascade.compiler.compile_many([render_transfer_path(Directives.from_label(label))], link.libraries,
                                             link.include_dirs, link.extra)
    if not built.ok:
        raise RuntimeError(f"the transfer path of {label} did not compile: {built.log_excerpt}")
    shape = w.parse_shape(name)
    res = run_harness(HarnessRequest(cascade.plugin(), [built.so_path], shape.dims, world=world, seeds=(1,), verify=False,
                                     bench=True, warmup=3, iters=iters, timeout_s=300))
    run = res.candidates[0]
    ms = run.timing.max_median_ms if run.status == "ok" and run.timing else None  # max over ranks
    nbytes = w.comm_bytes(shape, world)
    return {"transfer_path_ms": ms, "transfer_bytes": nbytes,
            "copy_gbps": nbytes / (ms * 1e-3) / 1e9 if ms else None, "transfer_path_status": run.status,
            "transfer_path_iters": iters, "copy_shape": name, "copy_pages_per_rank": kv_shapes.pages_per_rank(shape)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SWEEP))
    ap.add_argument("--evals", type=int, default=6)
    ap.add_argument("--long-iters", type=int, default=5)
    ap.add_argument("--runs", default="/tmp/cuco-kv-runs")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--world", type=int, default=1, help="ranks = GPUs (1, or even: prefill -> decode pairs)")
    ap.add_argument("--rank-layers", type=int, default=0,
                    help="rank the searched points on this many layers (0: the shape's own); record at the shape")
    ap.add_argument("--record-iters", type=int, default=30, help="timed iterations per figure-of-record repeat")
    ap.add_argument("--torch-json", default=None, help="output of benchmarks/torch_kv_transfer.py on this machine")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"kv_transfer_w{a.world}.json"
    meta = json.loads(path.read_text()) if path.exists() else {"world": a.world, "rows": [], "errors": []}
    rows = {r["shape"]: r for r in [*meta["rows"], *meta.get("small_rows", [])]}
    ranked: dict[str, list[str]] = {r["shape"]: r.get("timed_points", []) for r in rows.values()}
    meta["errors"] = [e for e in meta.get("errors", []) if e.get("shape") not in a.shapes.split(",")]
    meta["machine"] = machine(a.world)
    anchors = torch_rows(a.torch_json)
    for name in a.shapes.split(","):
        try:
            if name == "long":
                labels = ranked.get(LONG_FROM, [])[:3] or ["lsa/stream_overlap/world/copy_engine/whole"]
                row = retimed(name, labels, a.long_iters, a.world)
            else:
                row, order = searched(name, a.evals, Path(a.runs), a.world, a.rank_layers, a.record_iters)
                row["timed_points"] = order
                ranked[name] = order
            # The transfer path of the best design point (the fast path's program has no directives to render).
            point = next((p for p in [row.get("best_point"), *ranked.get(name, [])] if p and "/" in p), None)
            if point:
                try:
                    row.update(copy_point=point, **copy_gbps(name, point, a.long_iters if name == "long" else 20, a.world))
                except Exception as exc:  # the shape's row stands without it
                    row["copy_error"] = f"{type(exc).__name__}: {exc}"[:1000]
            merge_torch(row, anchors.get(name), "torch_kv_ms")
            rows[name] = row
        except Exception as exc:  # a failed shape is reported, the others still run
            traceback.print_exc()
            meta["errors"].append({"shape": name, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        # Sweep order first, then every other shape named on a command line (none is dropped); short prompts apart.
        order = [k for k in [*SWEEP, "long"] if k in rows] + [k for k in rows if k not in (*SWEEP, "long")]
        meta.update(rows=[rows[k] for k in order if table_of(k) == "rows"],
                    small_rows=[rows[k] for k in order if table_of(k) == "small_rows"],
                    date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        # after every shape (a cut-off call keeps the rest), merged with rows another lane wrote meanwhile
        write_md(out, save_meta(path, meta))


def exposed_share(r: dict[str, Any]) -> float | None:
    """(best - compute) / comm: the share of the transfer left exposed (the goal is <= 0.25)."""
    best, comp, comm = r.get("best_ms"), r.get("compute_ms"), r.get("comm_ms")
    return (best - comp) / comm if best and comp and comm else None


def _exposed_cell(r: dict[str, Any]) -> str:
    e = exposure(r)
    return f"{e['exposed_ms']:.3f} ± {e['exposed_ci95_ms']:.3f}" if e else "—"


def write_md(out: Path, meta: dict[str, Any]) -> None:
    rows = [*meta["rows"], *meta.get("small_rows", [])]
    env = newest_row(rows)
    world = meta.get("world", 1)
    lines = [f"# KV-cache transfer, world {world} — {env.get('device', '?')}, NCCL {env.get('nccl_version', '?')}, CUDA "
             f"runtime {env.get('cuda_runtime_version', '?')}, driver {env.get('driver_version', '?')}, "
             f"{meta.get('date', '?')}", "",
             "| shape | verified | host | fast path | best | speedup | compute | comm | exposed/comm | exposed ± 95 % | "
             "exposure | copy GB/s | torch kv | best point |", "|" + "---|" * 14]
    for r in rows:
        if r in meta.get("small_rows", []):  # a short prompt's row is told apart in its first cell
            r = {**r, "shape": f"{r['shape']} (short prompt, `small_rows`)"}
        lines.append(f"| {r['shape']} | {r.get('verified', False)} | {fmt(r.get('host_ms'))} | "
                     f"{fmt(r.get('fastpath_ms'))} | {fmt(r.get('best_ms'))} | {fmt(r.get('speedup'))} | "
                     f"{fmt(r.get('compute_ms'))} | {fmt(r.get('comm_ms'))} | {fmt(exposed_share(r), 2)} | "
                     f"{_exposed_cell(r)} | {exposure(r).get('exposure', '—')} | "
                     f"{fmt(r.get('copy_gbps'), 1)} | {fmt(r.get('torch_kv_ms'))} | `{r.get('best_point', '—')}` |")
    for e in meta.get("errors", []):
        lines.append(f"\nError ({e.get('shape')}): {e['error']}")
    lines += ["", "Times in ms: median of the timed iterations (max over ranks), host seed, fast path, best point and "
              "the parts (compute: the layer stack alone; comm: every layer's KV by ncclSend/ncclRecv alone) from the "
              "same harness process. " + ("W = 1 holds both roles on one GPU, so the transfer is a local copy into "
                                          "a separate paged cache. " if world == 1 else
                                          "Rank 2p prefills, rank 2p + 1 decodes. ") + "copy GB/s: the KV bytes (2 x S x KV x L x 2) over the transfer path of the best "
              "design point (copy_point in the JSON; the fastest searched point where the fast path won) timed alone "
              f"(its layer compute switched off); rows with copy_shape in the JSON were timed with at least {COPY_PAGES} "
              "pages per rank over all layers (layers added where the shape has fewer; copy_pages_per_rank), earlier "
              "ones at their own shape (8192 pages at S = 2048). 'long' re-times the best points of "
              f"{LONG_FROM} (no search at S = 32768). Where a row has `searched_at` in the JSON, its points were ranked "
              "on that (fewer-layer) stack and its figures of record taken at the full shape. torch kv: "
              "benchmarks/torch_kv_transfer.py (per-layer isend/irecv right after each layer's projection, or after "
              "the whole prefill, the faster) on the same machine in the same device call. exposed ± 95 %: best - compute, the mean "
              f"of each repeat's own difference (>= {RECORD_REPEATS} repeats, each one harness process) and its 95 % "
              f"confidence half-width; exposure: 'hidden' where it is at most {EXPOSED_GOAL} x comm, 'exposed' above, "
              f"'below resolution' where the half-width exceeds {RESOLUTION_SHARE} x comm (the hiding must then be "
              "shown in a CUPTI timeline: benchmarks/trace_points.py); '—' for rows recorded before the repeats' own "
              "figures were kept.", ""]
    (out / f"kv_transfer_w{world}.md").write_text("\n".join(lines + record_lines(meta)))


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    main()
