"""Where the time of a GEMM+AllGather point goes: variants of its rendered code (copies removed, GEMMs removed),
each timed by the cuco harness in its own process while nvidia-smi samples SM clock, power and the clock-event
reasons, plus the workload's parts (GEMM alone, NCCL AllGather alone) and the host seed.

    PYTHONPATH=src python3 benchmarks/probe_gemm_allgather.py --out DIR

Variants are diagnostics, not candidates: those that skip work produce wrong outputs and are timed unverified.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from cuco import workloads
from cuco.design_space import Directives
from cuco.evaluate.compile import Compiler
from cuco.harness.build import build_shared
from cuco.harness.runner import HarnessRequest, run_harness

WL = workloads.get("gemm_allgather")
EVOLVE_START = "// EVOLVE-BLOCK-START\n"
NO_GEMM = "namespace cuco_ag { template <typename... T> static int probe_no_gemm(T...) { return 0; } }\n"
CE_COPY = "if (cudaMemcpyAsync(a_full + (p * g.Mr + r0) * row_bytes"
CE_REMOTE = "if ((rc = gemm_rows(st, ctx, a_full + r0 * row_bytes"
SMI_FIELDS = "clocks.sm,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active"


def _no_gemms(code: str) -> str:
    head, block = code.split(EVOLVE_START, 1)
    return head + EVOLVE_START + NO_GEMM + block.replace("gemm_rows(st, ctx,", "probe_no_gemm(st, ctx,")


def variants(point: Directives) -> dict[str, str]:
    """name -> CUDA source. For copy-engine points also the GEMMs without the copy and the local GEMM alone."""
    code = WL.render(point)
    out = {"full": code, "copy_only": _no_gemms(code)}
    if point.issuer == "copy_engine" and point.placement == "stream_overlap":
        no_copy = code.replace(CE_COPY, "if (false && " + CE_COPY[4:], 1)
        out["gemms_without_copy"] = no_copy
        out["local_gemm_only"] = no_copy.replace(CE_REMOTE, "if (false && " + CE_REMOTE[4:], 1)
        out["local_gemm_with_copy"] = code.replace(CE_REMOTE, "if (false && " + CE_REMOTE[4:], 1)
    return out


class Sampler:
    """nvidia-smi samples every 50 ms, stamped with time.monotonic() as they arrive."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, list[str]]] = []
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu=index,{SMI_FIELDS}", "--format=csv,noheader,nounits",
                                      "-lms", "50"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.samples.append((time.monotonic(), [f.strip() for f in line.split(",")]))

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        """Median SM clock and power over busy samples (utilization >= 50 %) in [t0, t1], and the reasons seen."""
        busy = [f for t, f in self.samples if t0 <= t <= t1 and len(f) == 6 and f[4].isdigit() and int(f[4]) >= 50]
        if not busy:
            return {"busy_samples": 0}
        num = lambda i: statistics.median(float(f[i]) for f in busy)  # noqa: E731
        return {"busy_samples": len(busy), "sm_clock_mhz": num(1), "power_w": num(2), "temp_c": max(float(f[3]) for f in busy),
                "clock_event_reasons": sorted({f[5] for f in busy})}

    def stop(self) -> None:
        self.proc.terminate()


def _time(plugin: Path, sos: list[Path], dims: tuple[int, ...], sampler: Sampler, iters: int,
          parts: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    t0 = time.monotonic()
    res = run_harness(HarnessRequest(plugin, sos, dims, world=2, verify=False, bench=True, warmup=20, iters=iters,
                                     parts=parts, timeout_s=120))
    window = sampler.window(t0, time.monotonic())
    runs = {Path(r.path).name: (r.status, r.timing.max_median_ms if r.timing else None) for r in res.candidates}
    part_ms = {name: p.timing.max_median_ms if p.timing else None for name, p in (res.parts or {}).items()}
    return {"runs": runs, "parts": part_ms, "device": res.device, "nccl": res.nccl_version}, window


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", default="lsa/stream_overlap/team/copy_engine/whole;lsa/stream_overlap/team/cta/whole")
    ap.add_argument("--shapes", default="8192,8192,8192;32768,8192,8192")
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    plugin = build_shared(WL.plugin_path(), WL.libraries)
    names, codes = [], []
    for label in args.points.split(";"):
        for name, code in variants(Directives.from_label(label)).items():
            names.append(f"{label}:{name}")
            codes.append(code)
    names.append("host seed")
    codes.append(WL.seed_code())
    outcomes = Compiler().compile_many(codes, WL.libraries)
    bad = {n: o.log_excerpt for n, o in zip(names, outcomes) if not o.ok}
    if bad:
        raise SystemExit(f"variants do not compile: {bad}")
    sampler = Sampler()
    rows: list[dict[str, Any]] = []
    try:
        for shape in args.shapes.split(";"):
            dims = tuple(int(x) for x in shape.split(","))
            m, k, _n = dims
            copy_bytes = (m // 2) * k * 2
            result, window = _time(plugin, [outcomes[0].so_path], dims, sampler, args.iters, parts=True)
            for part, ms in result["parts"].items():
                rows.append({"shape": shape, "what": f"part:{part}", "ms": ms, **window})
            for name, o in zip(names, outcomes):
                result, window = _time(plugin, [o.so_path], dims, sampler, args.iters)
                status, ms = next(iter(result["runs"].values()))
                row = {"shape": shape, "what": name, "status": status, "ms": ms, **window}
                if name.endswith(":copy_only") and ms:
                    row["copy_GBps_per_rank"] = copy_bytes / (ms * 1e-3) / 1e9
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        sampler.stop()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": result.get("device"), "nccl": result.get("nccl"), "iters": args.iters,
            "note": "median ms of the timed iterations, max over ranks; unverified diagnostics; clocks and power "
                    "are medians of nvidia-smi samples (50 ms) with utilization >= 50% during that process",
            "rows": rows}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "probe_gemm_allgather.json").write_text(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main()
