"""compute-sanitizer (racecheck, synccheck) over GEMM+AllGather's fast-path candidate and best point at W = 1.

    python benchmarks/sanitize_w1.py --out DIR [--shape 512,256,384]

Each candidate runs verify-only in the cuco harness under each tool; the log of every run and a summary
(`sanitize_w1.json`: tool, candidate, errors reported, harness status) go to DIR. Needs a GPU and
compute-sanitizer (CUDA toolkit; found on PATH, under CUDA_HOME or /usr/local/cuda*/bin).
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
from cuco.design_space import Directives  # noqa: E402
from cuco.evaluate.compile import Compiler  # noqa: E402
from cuco.fastpath.agent import FastPathAgent  # noqa: E402
from cuco.harness.build import build_shared, harness_binary  # noqa: E402
from cuco.harness.runner import HarnessRequest  # noqa: E402
from cuco.kit.compute import link_options  # noqa: E402

TOOLS = ("racecheck", "synccheck")
# synccheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: H hazards displayed (N errors, ...".
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error|RACECHECK SUMMARY:[^(\n]*\((\d+)\s+error")


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shape", default="512,256,384")
    ap.add_argument("--timeout-s", type=float, default=240)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    wl = workloads.get("gemm_allgather")
    best = json.loads((ROOT / "benchmarks" / "results" / "gemm_allgather.json").read_text())["rows"][0]["best_point"]
    compiler = Compiler()
    link = link_options(wl, compiler.toolchain)
    plugin = build_shared(wl.plugin_path(), link.libraries, include_dirs=link.include_dirs, extra=link.extra)
    fast = FastPathAgent(llm=None, check_input=False, run_on_gpu=False).run(wl.seed_code()).code
    codes = {"fast_path": fast, f"best:{best}": wl.render(Directives.from_label(best))}
    outcomes = compiler.compile_many(list(codes.values()), link.libraries, link.include_dirs, link.extra)
    binary = harness_binary(compiler.toolchain)
    sanitizer = find_sanitizer()
    dims = tuple(int(x) for x in args.shape.split(","))
    rows = []
    for (name, _code), outcome in zip(codes.items(), outcomes):
        if not outcome.ok:
            rows.append({"candidate": name, "compiled": False, "log": outcome.log_excerpt})
            continue
        for tool in TOOLS:
            tag = f"{tool}_{name.split(':')[0]}"
            request = HarnessRequest(plugin, [outcome.so_path], dims, world=1, seeds=(1,), verify=True, bench=False,
                                     timeout_s=args.timeout_s)
            result_json = args.out / f"{tag}.json"
            cmd = [sanitizer, "--tool", tool, "--target-processes", "all", *request.argv(binary, result_json)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s + 60)
                log, rc = proc.stdout + proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as exc:
                log, rc = f"timed out after {args.timeout_s + 60:.0f}s\n{exc.stdout or ''}", 124
            (args.out / f"{tag}.log").write_text(log)
            counts = [int(a or b) for a, b in _SUMMARY.findall(log)]
            status = ""
            if result_json.is_file():
                cands = json.loads(result_json.read_text()).get("candidates", [])
                status = cands[0].get("status", "") if cands else ""
            rows.append({"candidate": name, "tool": tool, "errors": sum(counts) if counts else None,
                         "summaries": len(counts), "exit": rc, "harness_status": status})
            print(json.dumps(rows[-1]), flush=True)
    (args.out / "sanitize_w1.json").write_text(json.dumps({"shape": args.shape, "world": 1, "runs": rows}, indent=1))
    clean = all(r.get("errors") == 0 and r.get("harness_status") == "ok" for r in rows)
    print("sanitizer:", "clean" if clean else "findings or failures (see logs)")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
