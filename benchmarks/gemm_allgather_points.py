"""GEMM+AllGather, chosen design points side by side: per shape, each point through the cuco cascade (verified
under delayed arrival, then timed with the host seed and the parts of the bound in the same harness run), plus
torch's fused_all_gather_matmul from benchmarks/torch_anchor.py's JSON when given.

    PYTHONPATH=src python3 benchmarks/gemm_allgather_points.py --world 2 --out DIR [--torch-json T] \
        [--points 'lsa/fused/signal/cta/4MiB;...'] [--shapes '8192,8192,8192;...']

Writes DIR/gemm_allgather_points.{json,md} after every shape, so a cut-off run keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path
from typing import Any

SHAPES = ["8192,8192,8192", "16384,8192,3584", "4096,4096,4096", "32768,8192,8192", "12288,5120,5120",
          "2048,8192,28672"]
#: The persistent-GEMM family (fused) beside the best point of the split schemes on 2x H200 so far.
POINTS = ["lsa/fused/signal/cta/4MiB", "lsa/fused/signal/cta/16MiB", "lsa/fused/world/cta/whole",
          "lsa/fused/block/warp/1MiB", "lsa/stream_overlap/team/copy_engine/whole"]


def measure(shape: str, world: int, labels: list[str]) -> list[dict[str, Any]]:
    """Each point through the cascade at `shape` (one harness run times them all with the host and the parts)."""
    from cuco.candidate import Candidate
    from cuco.design_space import Directives
    from cuco.evaluate.cascade import Evaluator
    from cuco.workloads import get

    wl = get("gemm_allgather")
    cascade = Evaluator(wl, world=world, bench_shape=shape)
    batch = [Candidate(code=wl.render(Directives.from_label(p)), workload=wl.name,
                       directives=Directives.from_label(p), mutation="manual") for p in labels]
    rows = []
    for c in cascade.evaluate(batch):
        m, bench = c.metrics, c.results.get("bench")
        rows.append({"point": c.directives.label(), "status": c.status, "ms": m.get("time_ms"),
                     "host_ms": m.get("host_ms"), "compute_ms": m.get("compute_ms"), "comm_ms": m.get("comm_ms"),
                     "bound_ms": m.get("bound_ms"), "overlap_efficiency": m.get("overlap_efficiency"),
                     "speedup": m.get("speedup"), "spread": m.get("spread"),
                     "context": {k: v for k, v in (bench.data if bench else {}).items()
                                 if k in ("device", "nccl_version", "cuda_runtime_version", "driver_version", "date",
                                          "iters", "warmup")},
                     "reason": "" if c.status == "passed" else
                     next((r.reason for r in c.results.values() if not r.passed), "")[:600]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _torch(path: str | None) -> dict[tuple[int, ...], dict[str, Any]]:
    if not path or not Path(path).exists():
        return {}
    data = json.loads(Path(path).read_text())
    return {(r["M"], r["K"], r["N"]): {**r, "torch": data.get("torch")} for r in data.get("rows", [])}


def _fmt(v: Any, nd: int = 3) -> str:
    return f"{v:.{nd}f}" if isinstance(v, (int, float)) else "—"


def table(meta: dict[str, Any]) -> str:
    ctx = next((r["context"] for s in meta["shapes"] for r in s["points"] if r["context"].get("device")), {})
    out = [f"# GEMM+AllGather design points, world {meta['world']} — {ctx.get('device', '?')}, NCCL "
           f"{ctx.get('nccl_version', '?')}, CUDA runtime {ctx.get('cuda_runtime_version', '?')}, {meta['date']}", "",
           "| M,K,N | point | ms | host ms | GEMM ms | AG ms | bound ms | overlap eff. | torch fused ms | status |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for s in meta["shapes"]:
        for r in s["points"]:
            out.append(f"| {s['shape']} | `{r['point']}` | {_fmt(r['ms'])} | {_fmt(r['host_ms'])} | "
                       f"{_fmt(r['compute_ms'])} | {_fmt(r['comm_ms'])} | {_fmt(r['bound_ms'])} | "
                       f"{_fmt(r['overlap_efficiency'], 2)} | {_fmt(s.get('torch_fused_ms'))} | {r['status']} |")
    out += ["", "Times in ms: median of timed iterations, max over ranks; each shape's points, host seed (NCCL "
            "AllGather then cuBLASLt) and the parts of the bound (GEMM alone, AllGather alone) come from one harness "
            "run. overlap eff. = (host - point) / (host - bound). Every point was verified under delayed arrival "
            "before it was timed (status passed).", ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--shapes", default=";".join(SHAPES))
    ap.add_argument("--points", default=";".join(POINTS))
    ap.add_argument("--torch-json", default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch_rows = _torch(a.torch_json)
    meta: dict[str, Any] = {"world": a.world, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "shapes": []}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for shape in a.shapes.split(";"):
        entry: dict[str, Any] = {"shape": shape, "points": measure(shape, a.world, a.points.split(";"))}
        t = torch_rows.get(tuple(int(x) for x in shape.split(",")))
        if t:
            entry.update(torch_fused_ms=t.get("torch_fused_ms"), torch_host_ms=t.get("torch_host_ms"),
                         torch=t.get("torch"))
        meta["shapes"].append(entry)
        (out / "gemm_allgather_points.json").write_text(json.dumps(meta, indent=2))
        (out / "gemm_allgather_points.md").write_text(table(meta))
    print(table(meta), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    main()
