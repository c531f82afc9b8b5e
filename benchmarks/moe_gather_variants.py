"""MoE's fused point by its row-copy constants, on one GPU: where the chunk gather's time goes.

    python benchmarks/moe_gather_variants.py [--shape paper-r1] [--unroll 4,8,28] [--batch 1,4] [--ctas 16,32]
        [--json out.json]            (`bash benchmarks/gpu_w.sh 1 moe-gather-variants`)

The fused point's 16-CTA chunk gather took 3-7x deferred's gather at W = 1
(`benchmarks/results/moe_fused_arrival/README.md`). Its time grew by about 6 us per chunk, the mark of load
round trips taken one after another: a warp has one to three rows of a 4 MiB chunk and moves 4 words per lane per
trip. This renders each fused point with `kGatherUnroll` (16-byte words per thread per trip; 28 holds a whole row
of H = 7168 per warp lane), `kRowBatch` (rows per issuer group at once) and `kCommCtas` (the gather's CTAs, which
the FFN leaves) replaced. Each variant is timed
twice: whole, verified under delayed arrival, and as its dispatch alone (FFN and combine off). `deferred` runs in
the same harness processes as the control. If the round trips are the cause, the dispatch time falls with
unroll x batch.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from typing import Any

#: The candidate's constants a variant replaces, by the name this script gives them.
CONSTANTS = {"unroll": "kGatherUnroll", "batch": "kRowBatch", "ctas": "kCommCtas"}
POINTS = ("lsa/fused/signal/warp/4MiB/dispatch_dtype=bf16", "lsa/fused/signal/cta/4MiB/dispatch_dtype=bf16")
CONTROL = "lsa/deferred/world/cta/whole/dispatch_dtype=bf16"


def with_constants(code: str, values: dict[str, int]) -> str:
    """`code` with each named constant's `constexpr int NAME = N;` set to the value given."""
    for key, value in values.items():
        if key not in CONSTANTS:
            raise ValueError(f"unknown constant {key!r}: choose from {sorted(CONSTANTS)}")
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
        pattern = re.compile(rf"constexpr int {CONSTANTS[key]} = \d+;")
        if len(pattern.findall(code)) != 1:
            raise ValueError(f"{CONSTANTS[key]} is not defined exactly once in the candidate: update this script")
        code = pattern.sub(f"constexpr int {CONSTANTS[key]} = {value};", code)
    return code


def variants(unroll: list[int], batch: list[int], ctas: list[int]) -> list[dict[str, int]]:
    """Every combination of the values asked for."""
    return [{"unroll": u, "batch": b, "ctas": c} for u, b, c in itertools.product(unroll, batch, ctas)]


def _ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 4,8; got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return out


def run(shape: str, points: list[str], grid: list[dict[str, int]], iters: int) -> list[dict[str, Any]]:
    """Compile every (point, variant) whole and as its dispatch alone, then time them in two harness processes."""
    from cuco.design_space import Directives
    from cuco.evaluate.cascade import Evaluator
    from cuco.evaluate.levels import DEFAULT_VERIFY_DELAY_US
    from cuco.harness.runner import HarnessRequest, run_harness
    from cuco.workloads import get
    from cuco.workloads.moe.render import render, render_exchange_path

    w = get("moe")
    jobs = [(CONTROL, {})] + [(p, v) for p in points for v in grid]
    whole, alone = [], []
    for label, values in jobs:
        point = Directives.from_label(label)
        whole.append(with_constants(render(point), values))
        alone.append(with_constants(render_exchange_path(point, combine=False), values))
    cascade = Evaluator(w, world=1, bench_shape=shape)
    link = cascade.link()
    built = cascade.compiler.compile_many(whole + alone, link.libraries, link.include_dirs, link.extra)
    bad = [(jobs[i % len(jobs)], b.log_excerpt[:300]) for i, b in enumerate(built) if not b.ok]
    if bad:
        raise RuntimeError(f"{len(bad)} variants did not compile, e.g. {bad[0]}")
    dims = w.parse_shape(shape).dims
    common = dict(world=1, seeds=(1,), inputs="full", bench=True, warmup=5, iters=iters, timeout_s=300)
    timed_whole = run_harness(HarnessRequest(cascade.plugin(), [b.so_path for b in built[:len(jobs)]], dims,
                                             verify=True, delay_comm_us=DEFAULT_VERIFY_DELAY_US, **common))
    timed_alone = run_harness(HarnessRequest(cascade.plugin(), [b.so_path for b in built[len(jobs):]], dims,
                                             verify=False, **common))
    rows = []
    for (label, values), a, b in zip(jobs, timed_whole.candidates, timed_alone.candidates):
        rows.append({"point": label, **values, "status": a.status, "verified": a.ok, "ms": a.time_ms,
                     "dispatch_status": b.status, "dispatch_ms": b.time_ms})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="paper-r1")
    ap.add_argument("--unroll", type=_ints, default=[4, 8, 28])
    ap.add_argument("--batch", type=_ints, default=[1, 4])
    ap.add_argument("--ctas", type=_ints, default=[16, 32])
    ap.add_argument("--points", default=",".join(POINTS), help="comma-separated fused point labels")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = run(args.shape, [p for p in args.points.split(",") if p], variants(args.unroll, args.batch, args.ctas),
               args.iters)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": args.shape, "world": 1, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
