"""The checks of a run against where it runs, made before anything is written: the run directory can be made,
the GPUs fit the world, a resume asks for the run it names; and the manifest they are checked against."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cuco.errors import CucoError
from cuco.manifest import ManifestError, RunManifest, describe_gpus, sha256_text
from cuco.run_options import RunOptions


def check_run_dir(run_dir: Path) -> None:
    """Fail early, before anything is built, when the run directory cannot be created or written."""
    existing = run_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise CucoError(f"--run-dir {run_dir}: {existing} is a file, not a directory; choose another --run-dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CucoError(f"--run-dir {run_dir}: {existing} is not writable; choose a writable --run-dir "
                        "or fix its permissions")


def make_run_dir(run_dir: Path) -> None:
    """Create the run directory, or say why it cannot be and what to do."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CucoError(f"cannot create the run directory {run_dir} ({exc.strerror or exc}); "
                        "choose a writable --run-dir") from None


def check_gpus(executor: Any, world: int) -> str:
    """'measured' with a GPU group for `world`, 'unmeasured' with no GPU at all; an error for too few GPUs:
    a host with some GPUs but fewer than the world size is a wrong --world, not a machine without GPUs."""
    if executor.has_gpu:
        return "measured"
    if executor.gpus:
        raise CucoError(f"{executor.gpus} GPU(s) found, --world {world} needs {world}; run with --world "
                        f"{executor.gpus}, or hide the GPUs (CUDA_VISIBLE_DEVICES=) to only check and compile")
    return "unmeasured"


def make_manifest(workload: Any, cascade: Any, seed: int, evaluations: int,
                  budget_usd: float | None = None) -> RunManifest:
    """The manifest of a run of `workload` through `cascade` (a workload's Evaluator or a ProgramEvaluator)."""
    from cuco import __version__
    from cuco.evaluate.executor import visible_gpus

    tc = cascade.toolchain
    return RunManifest(workload=workload.name, program_sha256=sha256_text(workload.seed_code()),
                       shape=str(cascade.bench_shape), world=cascade.world, seed=seed, evaluations=evaluations,
                       cuco_version=__version__,
                       toolchain={"cuda": tc.cuda_version, "nccl": tc.nccl.version, "arch": tc.arch},
                       device=describe_gpus(visible_gpus() if cascade.has_gpu else ()), budget_usd=budget_usd)


def check_resume(stored: RunManifest, now: RunManifest, opts: RunOptions, evaluated: int) -> None:
    """Refuse a resume that asks for another problem, or for fewer evaluations than the run already holds."""
    diffs = stored.differences(now)
    if diffs:
        raise ManifestError(f"cannot resume {opts.run_dir}: " + "; ".join(diffs))
    if opts.evaluations is not None and opts.evaluations < evaluated:
        raise CucoError(f"--evals {opts.evaluations} but the run already holds {evaluated} evaluated candidates; "
                        f"pass --evals {evaluated} or more, or drop --evals to finish the run's {stored.evaluations}")
