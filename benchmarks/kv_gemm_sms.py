"""KV transfer's points whose transfer kernels run beside the layer compute, with the layer's GEMMs on every SM or
on the SMs those kernels leave: what keeping kCommCtas SMs free for the whole stack costs.

    python benchmarks/kv_gemm_sms.py [--world 1] [--shape 2048,512,4] [--points LABEL,...] [--repeats 5] \
        [--json out.json]            (`bash benchmarks/gpu_w.sh W kv-gemm-sms`)

The points plan their cuBLASLt GEMMs on every SM (block_setup's `const int sms = 0;`): their transfer kernels run
on the high-priority side stream and take SMs as the GEMMs' CTAs retire. Until `02be844` such a point planned the
GEMMs on sm_count - kCommCtas SMs, so that its transfer kernels always found SMs free: the GEMMs gave up 12 % of the
GPU for the whole stack to keep it free for the few percent of the time a layer's transfer takes. This renders each
point both ways (`all`: as the space renders it; `spare`: `sms = ctx->sm_count - kCommCtas`) and times them with
the host seed, `deferred` and the copy-engine point (no transfer kernel) in one harness process per repeat,
interleaved repeats (the order reversed every other one), the first verified, full-entropy inputs. At W = 1 the
transfer is a copy within the GPU; at W >= 2 it crosses the link, and takes longer beside the GEMMs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The points whose transfer kernels (kCommCtas CTAs on the side stream) run beside the compute, timed both ways.
BESIDE = ("lsa/stream_overlap/world/cta/whole", "lsa/stream_overlap/signal/cta/whole",
          "lsa/split_put_wait/signal/cta/1MiB", "lsa/fused/signal/cta/1MiB", "lsa/fused/world/cta/1MiB")
#: Points with no transfer kernel beside the compute: the controls, timed as rendered.
CONTROLS = ("lsa/deferred/world/cta/whole", "lsa/stream_overlap/world/copy_engine/whole")
#: How a variant sets the plan's SM count (block_setup's `const int sms = ...;`).
SMS = {"all": "0", "spare": "ctx->sm_count - kCommCtas"}
_SMS_LINE = re.compile(r"const int sms = [^;]+;")


def with_sms(code: str, variant: str) -> str:
    """`code` with its layer plan's SM count set as `variant` says ("all" or "spare")."""
    if variant not in SMS:
        raise ValueError(f"unknown variant {variant!r}: choose from {sorted(SMS)}")
    if len(_SMS_LINE.findall(code)) != 1:
        raise ValueError("the candidate does not set its plan's SM count exactly once (`const int sms = ...;`): "
                         "update this script")
    return _SMS_LINE.sub(f"const int sms = {SMS[variant]};", code)


def codes(points: Sequence[str], transfer_alone: bool = False) -> dict[str, str]:
    """Source per timed name: each beside point as `<label>#all` and `<label>#spare`, each control as rendered; with
    `transfer_alone`, each point's transfer path alone (its layer compute off), once."""
    from cuco.design_space import Directives
    from cuco.workloads.kv_transfer.render import render, render_transfer_path

    out: dict[str, str] = {}
    for label in points:
        if transfer_alone:
            out[label] = render_transfer_path(Directives.from_label(label))
            continue
        code = render(Directives.from_label(label))
        if label in CONTROLS:
            out[label] = code
        else:
            for variant in SMS:
                out[f"{label}#{variant}"] = with_sms(code, variant)
    return out


def summary(runs: list[dict[str, Any]], names: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Per name and for the parts: the median over the repeats and the spread ((max - min) / median)."""
    from record import _median

    out: dict[str, dict[str, float | None]] = {}
    for key in ["host", *names, "compute", "comm"]:
        values = [r[f"{key}_ms"] for r in runs if r.get(f"{key}_ms") is not None]
        med = _median(runs, f"{key}_ms")
        out[key] = {"median_ms": med,
                    "spread": (max(values) - min(values)) / med if values and med else None}
    return out


def transfer_gbps(shape_dims: Sequence[int], ms: float | None) -> float | None:
    """The KV bytes of every layer (2 x S x KV x L bf16) over `ms`, in GB/s (None without a time)."""
    s, kv, layers = shape_dims
    return 2 * s * kv * layers * 2 / (ms * 1e-3) / 1e9 if ms else None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=1, help="1 or even (prefill -> decode pairs)")
    ap.add_argument("--shape", default="2048,512,4", help="S,KV,L or a named shape (default: 4 layers of s2048-kv512)")
    ap.add_argument("--points", default=",".join(CONTROLS + BESIDE))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--transfer-alone", action="store_true",
                    help="time each point's transfer path alone (layer compute off; not verifiable) and its GB/s")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    if a.world < 1 or (a.world > 1 and a.world % 2):
        raise SystemExit(f"--world {a.world}: KV transfer pairs prefill and decode ranks; use 1 or an even size")
    from record import _built, _one_run, source_commit

    ev, sos = _built("kv_transfer", a.shape, a.world, codes([p for p in a.points.split(",") if p], a.transfer_alone),
                     "timing at")
    names = [k for k in sos if k != "host"]
    runs = []
    for i in range(a.repeats):
        order = ["host", *names] if i % 2 == 0 else ["host", *names[::-1]]
        # a transfer path alone moves whatever the buffers hold: it is timed, never verified
        run = _one_run(ev, sos, order, "full", i == 0 and not a.transfer_alone, a.iters)
        if run["failures"]:
            print(f"kv_gemm_sms: repeat {i + 1} failed: {run['failures']}", flush=True)
            return 1
        runs.append(run)
        print(json.dumps({k: v for k, v in run.items() if k.endswith("_ms")}), flush=True)
    figures = summary(runs, names)
    if a.transfer_alone:
        dims = tuple(ev.bench_shape.dims)
        for name in names:
            figures[name]["gbps"] = transfer_gbps(dims, figures[name]["median_ms"])
    row = {"shape": a.shape, "world": a.world, "repeats": a.repeats, "iters": a.iters, "inputs": "full",
           "transfer_alone": a.transfer_alone, "statuses": runs[0]["status"], "figures": figures,
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
