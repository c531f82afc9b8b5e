"""What `cuco run` is asked to do (RunOptions), the defaults of a new run, and the checks of the options alone,
made before anything is built or written."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import attrs

from cuco.errors import CucoError

#: Candidates a new run evaluates unless --evals says otherwise (the fast path's included).
DEFAULT_EVALUATIONS = 40
#: The LLM spending cap of a new run when --budget-usd is not given.
DEFAULT_BUDGET_USD = 5.0


@attrs.frozen
class RunOptions:
    """What `cuco run` was asked to do."""

    workload: str
    world: int | None = None        # None: the run's (on resume), else the workload's default
    shape: str | None = None        # None: the run's (on resume), else the workload's first bench shape
    evaluations: int | None = None  # None: the run's (on resume), else DEFAULT_EVALUATIONS
    run_dir: str | None = None
    resume: bool = False
    seed: int | None = None         # None: the run's (on resume), else 0
    model: str | None = None
    budget_usd: float | None = None  # None: the run's (on resume), else DEFAULT_BUDGET_USD
    #: USD per million (input, output) tokens, for a model litellm's price list does not know
    price_per_mtok: tuple[float, float] | None = None
    progress: bool = True
    batch_size: int = 8
    islands: int = 4
    executor: str = "local"         # "local": this host's GPUs; "ray": a Ray cluster (cuco.evaluate.ray_executor)
    address: str | None = None      # the Ray head (host:port); None: a new local Ray instance
    #: a host program's include dirs, libraries and nvcc flags (cuco.fastpath.verify.BuildOptions); None: none
    build: Any = None
    #: design points (labels, as `cuco space` prints them) evaluated right after the fast path, before the search
    #: proposes its own: what the user already suspects is good; each counts as one evaluation
    first_points: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    #: how a host program of one process per GPU gets its ranks (cuco.program.source.LAUNCHERS)
    launcher: str = "auto"
    #: re-time the search's winner against the reference in fresh rounds before offering it (Problem.confirm)
    confirm: bool = True


def run_dir_of(opts: RunOptions) -> Path:
    """The run directory: --run-dir, else a new runs/<workload>-<time> (a resume must name its directory)."""
    if opts.run_dir:
        return Path(opts.run_dir)
    if opts.resume:
        raise CucoError("--resume needs --run-dir DIR naming the run to continue")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{opts.workload}-{stamp}"


def check_options(opts: RunOptions) -> None:
    """Reject option values that cannot make a run, before anything is built or written."""
    if opts.evaluations is not None and opts.evaluations < 1:
        raise CucoError(f"--evals must be >= 1, got {opts.evaluations}")
    if opts.world is not None and opts.world < 1:
        raise CucoError(f"--world must be >= 1 (ranks, one GPU each), got {opts.world}")
    if opts.budget_usd is not None and not opts.budget_usd >= 0:  # also rejects NaN
        raise CucoError(f"--budget-usd must be >= 0, got {opts.budget_usd}")
    if opts.executor not in ("local", "ray"):
        raise CucoError(f"--executor must be local or ray, got {opts.executor!r}")
    if opts.address and opts.executor != "ray":
        raise CucoError("--address names a Ray head: add --executor ray, or drop --address")
    from cuco.program.source import LAUNCHERS

    if opts.launcher not in LAUNCHERS:
        raise CucoError(f"--launcher must be one of {', '.join(LAUNCHERS)}, got {opts.launcher!r}")


def run_budget(opts: RunOptions, stored: Any) -> float:
    """The run's LLM cap: --budget-usd when given, else the cap the run was started with (a resume must not fall
    back to the default and spend past the cap the run was given), else DEFAULT_BUDGET_USD."""
    if opts.budget_usd is not None:
        return opts.budget_usd
    if stored is None:
        return DEFAULT_BUDGET_USD
    if stored.budget_usd is None:
        if opts.model:
            raise CucoError(f"{opts.run_dir}: the run's LLM budget was not recorded when it was started; pass "
                            "--budget-usd with --resume")
        return DEFAULT_BUDGET_USD
    return float(stored.budget_usd)
