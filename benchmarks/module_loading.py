"""What eager module loading costs a program's runs: the program harness runs every process with
CUDA_MODULE_LOADING=EAGER (cuco.program.evaluator.RUN_ENV). This runs a corpus program's observed original
alternately under EAGER and LAZY loading, as the harness runs it, and reports per mode the process's wall time and
the region's warm and cold times (medians over runs), so a change of mode is decided on measured figures.

    PYTHONPATH=src python3 benchmarks/module_loading.py --program tp_mlp_cublas --world 2 --runs 4 --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "host_programs"
MODES = ("EAGER", "LAZY")


def summarise(samples: dict[str, list[dict[str, float | None]]]) -> dict[str, dict[str, float | None]]:
    """Per mode, the median of each figure over its runs (None where no run had it)."""
    out: dict[str, dict[str, float | None]] = {}
    for mode, runs in samples.items():
        out[mode] = {}
        for key in ("wall_s", "region_ms", "cold_ms"):
            values = [float(v) for r in runs if (v := r.get(key)) is not None]
            out[mode][key] = statistics.median(values) if values else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    from cuco.evaluate.executor import Executor
    from cuco.program.evaluator import REGION_REPEATS, RUN_ENV, ProgramEvaluator
    from cuco.program.source import HostProgram

    ev = ProgramEvaluator(HostProgram.load(CORPUS / f"{a.program}.cu"), world=a.world,
                          executor=Executor(world=a.world))
    binary = ev.compile_original()
    samples: dict[str, list[dict[str, float | None]]] = {m: [] for m in MODES}

    def rounds(group: Any) -> None:
        for _ in range(a.runs):
            for mode in MODES:   # alternately, so drift falls on both
                env = {**RUN_ENV, "CUDA_MODULE_LOADING": mode, "WORLD_SIZE": str(a.world),
                       "CUCO_REGION_REPEATS": str(REGION_REPEATS)}
                t0 = time.monotonic()
                obs, why = ev.launcher.run(binary, group, env, ev.timeout_s, ev.work_dir)
                wall = time.monotonic() - t0
                if obs is None:
                    raise SystemExit(f"{a.program} under {mode}: {why}")
                samples[mode].append({"wall_s": wall, "region_ms": obs.region_ms(), "cold_ms": obs.cold_ms()})
                print(f"{mode}: {wall:.2f} s, region {obs.region_ms()} ms, cold {obs.cold_ms()} ms", flush=True)

    ev.executor.run(rounds, exclusive=True)
    row = {"program": a.program, "world": a.world, "runs": a.runs, "device": ev.executor.describe(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "median": summarise(samples), "samples": samples}
    a.json.write_text(json.dumps(row, indent=1))
    print(json.dumps(row["median"], indent=1))
    ev.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
