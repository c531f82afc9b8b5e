"""KV transfer's points whose transfer kernels run beside the layer compute, with the layer's GEMMs on every SM or
on the SMs those kernels leave, on one GPU: what keeping 16 SMs free for the whole stack costs.

    python benchmarks/kv_gemm_sms.py [--shape 2048,512,4] [--points LABEL,...] [--repeats 5] [--json out.json]
        (`bash benchmarks/gpu_w.sh 1 kv-gemm-sms`)

Such a point plans its cuBLASLt GEMMs on sm_count - kCommCtas SMs (`const int sms = ...;` in its block_setup) so
that its transfer kernels always find SMs. The transfer of one layer takes tens of microseconds and the layer about
1.4 ms, so the GEMMs give up 12 % of the GPU for the whole stack to keep it free for a few percent of the time.
The other way is every SM for the GEMMs, the transfer kernels on the high-priority side stream taking SMs as the
GEMMs' CTAs retire. This renders each point both ways (`spare`: as the space renders it; `all`: `sms = 0`) and
times them with the host seed, `deferred` and the copy-engine point (which plan every SM) in one harness process
per repeat, interleaved repeats (the order reversed every other one), the first verified, full-entropy inputs.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The points whose transfer kernels run beside the compute (render.py's _beside_compute), timed both ways.
BESIDE = ("lsa/stream_overlap/world/cta/whole", "lsa/stream_overlap/signal/cta/whole",
          "lsa/split_put_wait/signal/cta/1MiB", "lsa/fused/signal/cta/1MiB", "lsa/fused/world/cta/1MiB")
#: Points that plan every SM already: the controls.
CONTROLS = ("lsa/deferred/world/cta/whole", "lsa/stream_overlap/world/copy_engine/whole")
#: How a variant sets the plan's SM count (block_setup's `const int sms = ...;`).
SMS = {"spare": "ctx->sm_count - kCommCtas", "all": "0"}
_SMS_LINE = re.compile(r"const int sms = [^;]+;")


def with_sms(code: str, variant: str) -> str:
    """`code` with its layer plan's SM count set as `variant` says ("spare" or "all")."""
    if variant not in SMS:
        raise ValueError(f"unknown variant {variant!r}: choose from {sorted(SMS)}")
    if len(_SMS_LINE.findall(code)) != 1:
        raise ValueError("the candidate does not set its plan's SM count exactly once (`const int sms = ...;`): "
                         "update this script")
    return _SMS_LINE.sub(f"const int sms = {SMS[variant]};", code)


def codes(points: Sequence[str]) -> dict[str, str]:
    """Source per timed name: each beside point as `<label>#spare` and `<label>#all`, each control as rendered."""
    from cuco.design_space import Directives
    from cuco.workloads.kv_transfer.render import render

    out: dict[str, str] = {}
    for label in points:
        code = render(Directives.from_label(label))
        if label in CONTROLS:
            out[label] = code
        else:
            for variant in SMS:
                out[f"{label}#{variant}"] = with_sms(code, variant)
    return out


def summary(runs: list[dict[str, Any]], names: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Per name and for the parts: the median over the repeats and the spread ((max - min) / median)."""
    out: dict[str, dict[str, float | None]] = {}
    for key in ["host", *names, "compute", "comm"]:
        values = [r[f"{key}_ms"] for r in runs if r.get(f"{key}_ms") is not None]
        med = statistics.median(values) if values else None
        out[key] = {"median_ms": med,
                    "spread": (max(values) - min(values)) / med if values and med else None}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="2048,512,4", help="S,KV,L or a named shape (default: 4 layers of s2048-kv512)")
    ap.add_argument("--points", default=",".join(CONTROLS + BESIDE))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    from record import _built, _one_run, source_commit

    ev, sos = _built("kv_transfer", a.shape, 1, codes([p for p in a.points.split(",") if p]), "timing at")
    names = [k for k in sos if k != "host"]
    runs = []
    for i in range(a.repeats):
        order = ["host", *names] if i % 2 == 0 else ["host", *names[::-1]]
        run = _one_run(ev, sos, order, "full", i == 0, a.iters)
        if run["failures"]:
            print(f"kv_gemm_sms: repeat {i + 1} failed: {run['failures']}", flush=True)
            return 1
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if k.endswith("_ms")}), flush=True)
    row = {"shape": a.shape, "world": 1, "repeats": a.repeats, "iters": a.iters, "inputs": "full",
           "statuses": runs[0]["status"], "figures": summary(runs, names),
           "per_repeat_ms": [{k: r.get(f"{k}_ms") for k in ["host", *names, "compute", "comm"]} for r in runs],
           "device": runs[0]["device"], "nccl_version": runs[0]["nccl_version"], "date": runs[0]["date"],
           "commit": source_commit()}
    print(json.dumps(row["figures"], indent=1), flush=True)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(row, indent=1))
    return 0 if all(s == "ok" for s in row["statuses"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
