"""compute-sanitizer over a workload's fast-path candidate and best point at world size W, under delayed arrival.

    python benchmarks/sanitize.py --workload attention_cp --world 2 --out DIR [--tools memcheck,synccheck]

Each candidate runs verify-only in the cuco harness (its verify shape, the communication path started late as in
the cascade's L2) under each tool; the log of every run and a summary (`sanitize_<workload>_w<W>.json`: tool,
candidate, errors reported, harness status) go to DIR. The best point is the one of the workload's results file
at W (`benchmarks/results/<workload>_w<W>.json`), else at W = 1. Needs GPUs and compute-sanitizer (CUDA toolkit;
found on PATH, under CUDA_HOME or /usr/local/cuda*/bin).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from cuco import workloads  # noqa: E402
from cuco.harness.runner import HarnessRequest  # noqa: E402
from points import FAST_PATH, best_points, build_points  # noqa: E402

TOOLS = ("memcheck", "synccheck", "racecheck")
# synccheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: H hazards displayed (N errors, ...".
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error|RACECHECK SUMMARY:[^(\n]*\((\d+)\s+error")
# A report of a device-side hazard (bad access, race, barrier misuse), as opposed to a host API call that returned
# an error code ("Program hit ..."): NCCL's communicator set-up probes kernels for other architectures and VMM
# handle types, and every such probe is counted in the tool's ERROR SUMMARY.
_DEVICE_HAZARD = re.compile(r"^=+ (Invalid |Race |Barrier error|Divergent|Misaligned|Out of range|Malloc/Free|"
                            r"Uninitialized|Leaked)", re.M)
_API_ERROR = re.compile(r"^=+ Program hit ", re.M)


def classify(log: str) -> dict[str, int | None]:
    """Counts of a sanitizer log: the tool's total, device-side hazards and host API error returns."""
    counts = [int(a or b) for a, b in _SUMMARY.findall(log)]
    return {"errors": sum(counts) if counts else None, "device_hazards": len(_DEVICE_HAZARD.findall(log)),
            "api_errors": len(_API_ERROR.findall(log))}


def find_sanitizer() -> str:
    found = shutil.which("compute-sanitizer")
    cands = [found] if found else []
    if os.environ.get("CUDA_HOME"):
        cands.append(str(Path(os.environ["CUDA_HOME"]) / "bin" / "compute-sanitizer"))
    cands += sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"), reverse=True)
    for c in cands:
        if c and Path(c).is_file():
            return c
    raise SystemExit("compute-sanitizer not found: install the CUDA toolkit or set CUDA_HOME")


def main() -> int:
    from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="gemm_allgather")
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shape", default=None, help="default: the workload's first verify shape at W")
    ap.add_argument("--tools", default="memcheck,synccheck")
    ap.add_argument("--timeout-s", type=float, default=240)
    ap.add_argument("--points", default="fastpath,best", help="which of the fast path and the best point to check")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    wl = workloads.get(args.workload)
    best = best_points(args.workload, args.world)[0]
    shape = wl.resolve_shape(args.shape, args.world, "verify")
    chosen = {x.strip() for x in args.points.split(",")}
    if not chosen or not chosen <= {"fastpath", "best"}:
        raise SystemExit(f"--points takes fastpath and/or best, got {args.points!r}")
    plugin, binary, built, _ = build_points(wl, [p for p, k in ((FAST_PATH, "fastpath"), (best, "best")) if k in chosen])
    sanitizer = find_sanitizer()
    tag0 = f"{args.workload}_w{args.world}"
    rows = []
    for point, outcome in built:
        name = "fast_path" if point == FAST_PATH else f"best:{point}"
        if not outcome.ok:
            rows.append({"candidate": name, "compiled": False, "log": outcome.log_excerpt})
            continue
        for tool in args.tools.split(","):
            tag = f"{tag0}_{tool}_{name.split(':')[0]}"
            request = HarnessRequest(plugin, [outcome.so_path], shape.dims, world=args.world, seeds=(1,), verify=True,
                                     bench=False, timeout_s=args.timeout_s, delay_comm_us=DEFAULT_VERIFY_DELAY_US)
            result_json = args.out / f"{tag}.json"
            cmd = [sanitizer, "--tool", tool, "--target-processes", "all", *request.argv(binary, result_json)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s + 60)
                log, rc = proc.stdout + proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as exc:
                log, rc = f"timed out after {args.timeout_s + 60:.0f}s\n{exc.stdout or ''}", 124
            (args.out / f"{tag}.log").write_text(log)
            counts = classify(log)
            status = ""
            if result_json.is_file():
                cands = json.loads(result_json.read_text()).get("candidates", [])
                status = cands[0].get("status", "") if cands else ""
            rows.append({"candidate": name, "tool": tool, **counts, "exit": rc, "harness_status": status,
                         "first_hazard": next(iter(_DEVICE_HAZARD.findall(log)), "")})
            print(json.dumps(rows[-1]), flush=True)
    (args.out / f"sanitize_{tag0}.json").write_text(json.dumps(
        {"workload": args.workload, "shape": str(shape), "world": args.world, "delay_comm_us": DEFAULT_VERIFY_DELAY_US,
         "runs": rows}, indent=1))
    # Clean: the candidate verified under the tool and the tool saw no device-side hazard (API error returns inside
    # NCCL's set-up are listed, not counted against the candidate).
    clean = all(r.get("device_hazards") == 0 and r.get("errors") is not None and r.get("harness_status") == "ok"
                for r in rows)
    print(f"sanitizer {tag0}:", "clean" if clean else "findings or failures (see logs)")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
