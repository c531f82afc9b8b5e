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


FIGURES = ("wall_s", "region_ms", "cold_ms")


def _values(runs: list[dict[str, float | None]], key: str) -> list[float]:
    return [float(v) for r in runs if (v := r.get(key)) is not None]


def summarise(samples: dict[str, list[dict[str, float | None]]]) -> dict[str, dict[str, float | None]]:
    """Per mode, the median of each figure over its runs (None where no run had it)."""
    return {mode: {key: statistics.median(xs) if (xs := _values(runs, key)) else None for key in FIGURES}
            for mode, runs in samples.items()}


def spreads(samples: dict[str, list[dict[str, float | None]]]) -> dict[str, dict[str, float | None]]:
    """Per mode, each figure's (max - min) / median over its runs, as docs/measuring.md defines a spread (None
    with fewer than two runs)."""
    return {mode: {key: (max(xs) - min(xs)) / statistics.median(xs) if len(xs := _values(runs, key)) >= 2
                   and statistics.median(xs) > 0 else None for key in FIGURES}
            for mode, runs in samples.items()}


def record(program: str, world: int, device: str, date: str,
           samples: dict[str, list[dict[str, float | None]]]) -> dict[str, Any]:
    """The results file: medians and spreads per mode, every run, the device's GPU model."""
    by = spreads(samples)
    worst = [v for mode in by.values() for v in mode.values() if v is not None]
    return {"program": program, "world": world, "runs": min(len(r) for r in samples.values()), "device": device,
            "date": date, "median": summarise(samples), "spread_by_mode": by,
            "spread": max(worst) if worst else None, "samples": samples}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    from cuco.evaluate.executor import Executor, visible_gpus
    from cuco.manifest import describe_gpus
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
    row = record(a.program, a.world, f"{describe_gpus(visible_gpus())} x{a.world}",
                 datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), samples)
    a.json.write_text(json.dumps(row, indent=1))
    print(json.dumps({"median": row["median"], "spread": row["spread"]}, indent=1))
    ev.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
