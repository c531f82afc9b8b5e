"""MoE on the GPU machine, in one call: per shape and skew r, the host baseline, the fast-path candidate, the
best point of an offline directive search, the bound parts (FFN alone on the received rows, dispatch+combine
alone) and torch's grouped-GEMM FFN on the same rows; then an exhaustive sweep of every legal point for one shape,
and after how many search evaluations the search was within 5% of the exhaustive best.

    PYTHONPATH=src python3 benchmarks/moe.py --out benchmarks/results [--evals 10] [--sweep paper-r3]

Every cuco time comes from the harness (CUDA events on every rank, median of the timed iterations, max over
ranks); host, candidates and the parts are timed in the same harness process. The world size W is read at run
time (--world, default: every visible GPU).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record import fmt, machine, record_lines  # noqa: E402  (a sibling script)
from results_rows import (merge_torch, newest_row, open_meta, put_error, put_row, save_meta,  # noqa: E402
                          torch_rows)  # (a sibling script)
from search_rows import search_row  # noqa: E402  (a sibling script)

RESULTS = HERE / "results"
SHAPES = ["paper-r3", "dsv3-r1", "dsv3-r3", "paper-r2", "paper-r4", "paper-r5"]
ANCHOR_SEED = 1  # the harness fills with its first seed before timing the parts: the same routing


def anchor_ms(shape: Any, world: int) -> dict[str, Any]:
    """torch's grouped GEMM FFN (torch._grouped_mm, SwiGLU between) on each rank's received rows, max over ranks."""
    import torch

    from moe_compute import time_ms, torch_ffn  # the same FFN and timing as the compute check

    from cuco.workloads.moe import routing

    t, h, i, e, k, r = shape.dims
    counts = routing.received_counts(routing.RoutingSpec(t, e, k, r), ANCHOR_SEED, world)  # [W, E]
    el = e // world
    dev = torch.device("cuda")
    w1 = ((torch.rand(el, 2 * i, h, device=dev) - 0.5) / 32).bfloat16().transpose(1, 2)
    w2 = ((torch.rand(el, h, i, device=dev) - 0.5) / 32).bfloat16().transpose(1, 2)
    per_rank = []
    for q in range(world):
        rows = counts[:, q * el:(q + 1) * el].sum(axis=0).tolist()
        ends = torch.cumsum(torch.tensor(rows, device=dev), 0).to(torch.int32)
        x = (torch.rand(int(sum(rows)), h, device=dev) - 0.5).bfloat16()

        per_rank.append(time_ms(lambda x=x: torch_ffn(x, w1, w2, ends), iters=30)[0])
        del x
    return {"anchor_compute_ms": max(per_rank), "anchor_per_rank_ms": per_rank, "torch": torch.__version__}


#: The published anchor the exchange alone is set beside (DeepEP's docs/legacy.md, V1 normal kernels).
DEEPEP_ANCHOR = ("DeepEP V1 intranode normal kernels on H800 (~160 GB/s NVLink maximum), EP 8, 4096 tokens, hidden "
                 "7168, top-8 experts, FP8 dispatch and BF16 combine: 153 GB/s dispatch and 158 GB/s combine "
                 "bottleneck bandwidth (0.96 and 0.99 of the link's maximum)")


def exchange_alone(name: str, label: str, world: int, iters: int = 20) -> dict[str, Any]:
    """The best point's exchange by itself (render_exchange_path: the FFN off): dispatch alone (the combine off too),
    then dispatch and combine; the combine is their difference. GB/s per rank: the payload of the rows a rank
    receives from the others on average (fp8 or bf16 dispatch, bf16 combine) over the time, max over ranks."""
    from cuco.design_space import Directives
    from cuco.evaluate.cascade import Evaluator
    from cuco.harness.runner import HarnessRequest, run_harness
    from cuco.workloads import get
    from cuco.workloads.moe.render import render_exchange_path

    w = get("moe")
    point = Directives.from_label(label)
    cascade = Evaluator(w, world=world, bench_shape=name)  # only its build path: libraries, compute library, plugin
    link = cascade.link()
    built = cascade.compiler.compile_many([render_exchange_path(point, combine=False), render_exchange_path(point)],
                                          link.libraries, link.include_dirs, link.extra)
    bad = [b.log_excerpt for b in built if not b.ok]
    if bad:
        raise RuntimeError(f"the exchange alone of {label} did not compile: {bad[0][:500]}")
    shape = w.parse_shape(name)
    res = run_harness(HarnessRequest(cascade.plugin(), [b.so_path for b in built], shape.dims, world=world,
                                     seeds=(ANCHOR_SEED,), verify=False, bench=True, warmup=3, iters=iters,
                                     timeout_s=300))
    by_path = {r.path: r for r in res.candidates}
    runs = [by_path.get(str(b.so_path)) for b in built]
    ms = [r.timing.max_median_ms if r is not None and r.status == "ok" and r.timing else None for r in runs]
    t, h, _i, _e, k, _r = shape.dims
    rows_in = t * k * (world - 1) / world
    out: dict[str, Any] = {"exchange_point": label, "dispatch_alone_ms": ms[0], "exchange_alone_ms": ms[1],
                           "exchange_alone_status": [r.status if r is not None else "missing" for r in runs],
                           "exchange_iters": iters}
    if ms[0] and ms[1] and ms[1] > ms[0]:
        out["combine_alone_ms"] = ms[1] - ms[0]
        out["dispatch_gbps"] = rows_in * h * (1 if point.get("dispatch_dtype") == "fp8" else 2) / (ms[0] * 1e-3) / 1e9
        out["combine_gbps"] = rows_in * h * 2 / (out["combine_alone_ms"] * 1e-3) / 1e9
    return out


def run_shape(name: str, world: int, evals: int, runs: Path) -> dict[str, Any]:
    """Search one MoE shape: the best point, its bound parts, the fast path and every evaluation."""
    return search_row("moe", name, world, evals, runs)


def sweep(name: str, world: int) -> dict[str, Any]:
    """Every legal point of the space through the cascade at shape `name` (exhaustive truth)."""
    from cuco.candidate import Candidate
    from cuco.design_space import Topology
    from cuco.evaluate.cascade import Evaluator
    from cuco.workloads import get

    w = get("moe")
    cascade = Evaluator(w, world=world, bench_shape=name)
    points = list(w.space(Topology(world=world, nodes=1, gin_available=False)).points())
    out = []
    for b in range(0, len(points), 8):
        batch = [Candidate(code=w.render(p), workload="moe", directives=p, mutation="manual")
                 for p in points[b:b + 8]]
        for c in cascade.evaluate(batch):
            out.append({"point": c.directives.label(), "status": c.status, "ms": c.metrics.get("time_ms"),
                        "host_ms": c.metrics.get("host_ms"),
                        "reason": "" if c.status == "passed" else
                        next((x.reason for x in c.results.values() if not x.passed), "")[:400]})
            print(out[-1], flush=True)
    timed = [r for r in out if r["status"] == "passed" and r["ms"]]
    best = min(timed, key=lambda r: r["ms"]) if timed else None
    return {"shape": name, "points": len(points), "passed": len(timed), "best": best, "all": out}


def within_5pct(search_row: dict[str, Any], truth: dict[str, Any]) -> int | None:
    """1-based index of the first search evaluation whose time is within 5% of the exhaustive best."""
    if not truth.get("best"):
        return None
    target = truth["best"]["ms"] * 1.05
    for n, ev in enumerate(search_row.get("evaluations_in_order", []), 1):
        if ev["status"] == "passed" and ev["ms"] and ev["ms"] <= target:
            return n
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=0, help="ranks (0: every visible GPU)")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--evals", type=int, default=10)
    ap.add_argument("--sweep", default="paper-r3", help="shape of the exhaustive sweep ('' to skip)")
    ap.add_argument("--runs", default="/tmp/cuco-moe-runs")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--torch-json", default=None, help="output of benchmarks/torch_moe_layer.py on this machine")
    a = ap.parse_args()
    world = a.world
    if world <= 0:
        import torch

        world = torch.cuda.device_count()
    from cuco.workloads import get

    w = get("moe")
    shapes = [s for s in a.shapes.split(",") if s]
    for s in shapes:  # bad names and shapes fail here, before anything builds
        w.check_shape(w.parse_shape(s), world)
    out = Path(a.out)
    anchors = torch_rows(a.torch_json)
    meta = open_meta(out / f"moe_w{world}.json", world)  # rows of other shapes from earlier calls stay
    meta.update(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=machine(world))
    for name in shapes:
        try:
            row = run_shape(name, world, a.evals, Path(a.runs))
        except Exception as exc:  # one shape's failure must not lose the others
            put_error(meta, name, repr(exc), traceback.format_exc())
            _write(out, meta)
            continue
        try:
            row.update(anchor_ms(w.parse_shape(name), world))
            if row.get("compute_ms") and row.get("anchor_compute_ms"):
                row["anchor_over_compute"] = row["anchor_compute_ms"] / row["compute_ms"]
        except Exception as exc:
            row["anchor_error"] = repr(exc)
        merge_torch(row, anchors.get(name), "torch_layer_ms")
        put_row(meta, row)
        _write(out, meta)
        if world > 1 and str(row.get("best_point", "")).startswith("lsa/"):  # after the row is safe on disk
            try:
                row.update(exchange_alone(name, row["best_point"], world))
            except Exception as exc:
                row["exchange_error"] = repr(exc)[:500]
            put_row(meta, row)
            _write(out, meta)
        if name == a.sweep:  # right after its search, so a cut-off run still has both
            try:
                truth = sweep(a.sweep, world)
                truth["search_within_5pct_after"] = within_5pct(row, truth)
                truth["search_evaluations"] = len(row.get("evaluations_in_order", []))
                meta["sweep"] = truth
            except Exception as exc:
                meta["errors"].append({"sweep": a.sweep, "error": repr(exc), "trace": traceback.format_exc()[-2000:]})
            _write(out, meta)


def _write(out: Path, meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tag = f"moe_w{meta['world']}"
    meta = save_meta(out / f"{tag}.json", meta)  # merged with rows another lane wrote meanwhile
    rows = meta["rows"]
    env = newest_row(rows)
    lines = [f"# MoE, world {meta['world']} — {env.get('device', '?')}, NCCL {env.get('nccl_version', '?')}, "
             f"CUDA runtime {env.get('cuda_runtime_version', '?')}, {meta['date']}", "",
             "| shape | verified | host | fast path | best (cuco) | speedup | FFN alone | dispatch+combine | "
             "overlap eff. | torch layer | torch grouped FFN | anchor/FFN | best point |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        layer = fmt(r.get("torch_layer_ms"))
        if r.get("torch_layer_exchange_ms") is not None:  # the anchor's breakdown, where it was measured
            layer += (f" (exchange alone {fmt(r['torch_layer_exchange_ms'])}, FFN alone "
                      f"{fmt(r.get('torch_layer_ffn_ms'))})")
        lines.append(f"| {r['shape']} | {r.get('verified', False)} | {fmt(r.get('host_ms'))} | "
                     f"{fmt(r.get('fastpath_ms'))} | {fmt(r.get('best_ms'))} | {fmt(r.get('speedup'))} | "
                     f"{fmt(r.get('compute_ms'))} | {fmt(r.get('comm_ms'))} | {fmt(r.get('overlap_efficiency'), 2)} | "
                     f"{layer} | {fmt(r.get('anchor_compute_ms'))} | "
                     f"{fmt(r.get('anchor_over_compute'), 2)} | `{r.get('best_point', '—')}` |")
    alone = [r for r in rows if r.get("dispatch_alone_ms") is not None]
    if alone:
        p2p = (meta.get("machine") or {}).get("p2p") or {}
        one_peer = p2p.get("one_peer_median_gbps")
        lines += ["", f"Exchange alone (the best point with its FFN off; µs, max over ranks; GB/s per rank: the rows "
                  f"a rank receives from the others, on average, over the time). Measured peer-to-peer here: "
                  f"{fmt(one_peer, 0)} GB/s one peer at a time. Published anchor: {DEEPEP_ANCHOR}.", "",
                  "| shape | point | dispatch µs | dispatch GB/s | combine µs | combine GB/s |",
                  "|---|---|---|---|---|---|"]
        for r in alone:
            comb = r.get("combine_alone_ms")
            lines.append(f"| {r['shape']} | `{r['exchange_point']}` | {fmt(r['dispatch_alone_ms'] * 1e3, 1)} | "
                         f"{fmt(r.get('dispatch_gbps'), 1)} | {fmt(comb * 1e3 if comb else None, 1)} | "
                         f"{fmt(r.get('combine_gbps'), 1)} |")
    sw = meta.get("sweep")
    if sw:
        best = sw.get("best") or {}
        lines += ["", f"Exhaustive sweep at {sw['shape']}: {sw['passed']} of {sw['points']} legal points verified and "
                  f"timed; best `{best.get('point', '—')}` {fmt(best.get('ms'))} ms. The search was within 5% of it "
                  f"after {sw.get('search_within_5pct_after', '—')} of its {sw.get('search_evaluations', '—')} "
                  "evaluations."]
    for e in meta["errors"]:
        lines.append(f"\nError ({e.get('shape') or e.get('sweep')}): {e['error']}")
    lines += ["", "Times in ms: median of the timed iterations, max over ranks. Host, fast path, best and the parts "
              "(FFN alone on the received rows through the compute library; dispatch+combine alone through NCCL "
              "grouped send/recv) come from the same harness process; torch's grouped-GEMM FFN (torch._grouped_mm) "
              "on the same rows in the same device session. torch layer: benchmarks/torch_moe_layer.py "
              "(all_to_all_single dispatch, torch._grouped_mm SwiGLU, all_to_all_single combine, count exchange and "
              "host sync included, the same routing) on the same machine in the same device call; where measured, "
              "beside it its exchange chain alone (the FFN skipped) and its grouped FFN alone. A torch layer about "
              "twice cuco's time at the paper shapes is a measurement to explain before it is a result.", ""]
    (out / f"{tag}.md").write_text("\n".join(lines + record_lines(meta)))


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    main()
