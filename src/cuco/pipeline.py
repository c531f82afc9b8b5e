"""The main job, `cuco run WORKLOAD|FOLDER|PROGRAM.cu`: options, summary and the checks around a run; the run
itself is owned by cuco.run.Run (fast path, then an offline directive search through the evaluator).

1. The workload's host seed goes through the FastPathAgent (rule-based, no LLM) and becomes a correct
   device-initiated candidate; the template's conservative point is the search's first seed.
2. The search (islands, directive mutator; LLM mutations only when a model is named) evaluates candidates
   through the cascade: L0+L1 everywhere, L2+L3 where the GPUs for one world are present.
3. The summary names the best verified point, its time, the host time, the bound and the overlap
   efficiency, all measured in the same harness runs — or says plainly that nothing was timed.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any, Callable

import attrs

from cuco.candidate import Candidate
from cuco.errors import CucoError
from cuco.manifest import ManifestError, RunManifest, describe_gpus, sha256_text

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


@attrs.frozen
class RunSummary:
    """The outcome of a run: enough to print, to store as JSON, and to find the run again."""

    workload: str
    run_dir: Path
    evaluation: str             # "measured" (verified and timed here) or "unmeasured" (checked and compiled only)
    evaluated: int
    counts: dict[str, int]
    best: Candidate | None
    fastpath: Candidate | None
    environment: dict[str, Any]

    @property
    def measured(self) -> bool:
        """True when the run measured its candidates on GPUs (evaluation 'measured')."""
        return self.evaluation == "measured"

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict; candidates as id, point, status, fitness, metrics and feedback."""
        def cand(c: Candidate | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {"id": c.id, "point": point_of(c), "mutation": c.mutation,
                    "status": c.status, "fitness": c.fitness, "metrics": dict(c.metrics), "feedback": c.feedback}

        return {"workload": self.workload, "run_dir": str(self.run_dir), "evaluation": self.evaluation,
                "evaluated": self.evaluated, "counts": self.counts, "best": cand(self.best),
                "fastpath": cand(self.fastpath), "environment": self.environment}

    def text(self) -> str:
        """The summary as `cuco run` prints it: counts, fast path, best point and its times, run directory."""
        from cuco.evaluate.cascade import feedback_headline

        lines = [f"cuco run {self.workload}: {self.evaluated} candidates evaluated "
                 f"({', '.join(f'{k} {v}' for k, v in sorted(self.counts.items()))})"]
        if self.fastpath is not None:
            lines.append(f"fast path: {self.fastpath.status}; {feedback_headline(self.fastpath.feedback)}")
        if not self.measured:
            compiled = self.counts.get("unmeasured", 0)   # only a candidate that compiled reaches 'unmeasured'
            lines.append(f"No GPU here: {compiled} of {self.evaluated} candidates passed the static check and "
                         "compiled, none was verified or timed (status 'unmeasured'); run on a host with GPUs to "
                         "measure.")
        elif self.best is None:
            lines.append("No candidate passed verification and timing; see the run database for the reasons.")
        else:
            m = self.best.metrics
            point = point_of(self.best) or f"({self.best.mutation})"
            lines.append(f"best point   {point}")
            if self.best.mutation == "original":
                lines.append(f"             no verified rewrite was faster than your program (the fastest: "
                             f"{m.get('fastest_rewrite_ms', float('nan')):.3f} ms); best/ holds it unchanged")
            lines.append(f"time         {m.get('time_ms', float('nan')):.3f} ms   "
                         f"(host {m.get('host_ms', float('nan')):.3f} ms, speedup {m.get('speedup', float('nan')):.3f}x)")
            if "bound_ms" in m:
                lines.append(f"bound        {m['bound_ms']:.3f} ms   (compute {m.get('compute_ms', float('nan')):.3f}, "
                             f"comm {m.get('comm_ms', float('nan')):.3f})")
            if "overlap_efficiency" in m:
                lines.append(f"overlap eff  {m['overlap_efficiency']:.3f}   (T_host - T) / (T_host - T_bound)")
            env = self.environment
            lines.append(f"measured on  {env.get('device', '?')}, NCCL {env.get('nccl_version', '?')}, {env.get('date', '')}")
        lines.append(f"run dir      {self.run_dir}")
        return "\n".join(lines)


def point_of(c: Candidate) -> str | None:
    """A candidate's design point label; 'original' for a user's program itself; None for a point-less edit."""
    if c.mutation == "original":
        return "original"
    return c.directives.label() if c.directives else None


def _run_dir(opts: RunOptions) -> Path:
    if opts.run_dir:
        return Path(opts.run_dir)
    if opts.resume:
        raise CucoError("--resume needs --run-dir DIR naming the run to continue")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{opts.workload}-{stamp}"


def _check_options(opts: RunOptions) -> None:
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


def _check_run_dir(run_dir: Path) -> None:
    """Fail early, before anything is built, when the run directory cannot be created or written."""
    existing = run_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise CucoError(f"--run-dir {run_dir}: {existing} is a file, not a directory; choose another --run-dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CucoError(f"--run-dir {run_dir}: {existing} is not writable; choose a writable --run-dir "
                        "or fix its permissions")


def _make_run_dir(run_dir: Path) -> None:
    """Create the run directory, or say why it cannot be and what to do."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CucoError(f"cannot create the run directory {run_dir} ({exc.strerror or exc}); "
                        "choose a writable --run-dir") from None


def _progress(enabled: bool) -> Any:
    return "auto" if enabled else None


def _check_gpus(executor: Any, world: int) -> str:
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


def _check_resume(stored: RunManifest, now: RunManifest, opts: RunOptions, evaluated: int) -> None:
    """Refuse a resume that asks for another problem, or for fewer evaluations than the run already holds."""
    diffs = stored.differences(now)
    if diffs:
        raise ManifestError(f"cannot resume {opts.run_dir}: " + "; ".join(diffs))
    if opts.evaluations is not None and opts.evaluations < evaluated:
        raise CucoError(f"--evals {opts.evaluations} but the run already holds {evaluated} evaluated candidates; "
                        f"pass --evals {evaluated} or more, or drop --evals to finish the run's {stored.evaluations}")


def run_workload(opts: RunOptions, on_event: Callable[[str], None] | None = None) -> RunSummary:
    """Run (or resume) the main job through its owner (cuco.run.Run) and return its summary; also writes
    summary.json and, when a candidate was verified and timed, best/ in the run directory. Messages go to
    `on_event`, by default the "cuco" logger (logging.getLogger("cuco")) at INFO."""
    from cuco.run import Run

    with Run.open(opts, on_event) as run:
        run.seed()
        run.search()
        return run.summary()


def parent_code_from(db: Any) -> Callable[[Candidate], str | None]:
    """The Evaluator's `parent_code` callback: the stored parent's source, for L0's frozen-region check.

    None (no check) for a candidate without a stored parent, and for a directive child of a parent that is not
    a rendering of the workload's template (the fast path's program): such a child is the template rendered
    afresh by cuco, not an edit of its parent, so there is no shared frozen code to compare."""
    from cuco.db import UnknownCandidateError

    def code(c: Candidate) -> str | None:
        if not c.parent_id:
            return None
        try:
            parent = db.get(c.parent_id)
        except UnknownCandidateError:
            return None
        if parent.directives is None and c.mutation.startswith("directive"):
            return None
        return parent.code
    return code
