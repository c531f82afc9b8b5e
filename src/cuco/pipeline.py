"""The main job, `cuco run WORKLOAD`: fast path, then an offline directive search through the cascade.

1. The workload's host seed goes through the FastPathAgent (rule-based, no LLM) and becomes a correct
   device-initiated candidate; the template's conservative point is the search's first seed.
2. The search (islands, directive mutator; LLM mutations only when a model is named) evaluates candidates
   through the cascade: L0+L1 everywhere, L2+L3 where the GPUs for one world are present.
3. The summary names the best verified point, its time, the host time, the bound and the overlap
   efficiency, all measured in the same harness runs — or says plainly that nothing was timed.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any, Callable

import attrs

from cuco.candidate import Candidate
from cuco.design_space import Topology
from cuco.errors import CucoError


@attrs.frozen
class RunOptions:
    """What `cuco run` was asked to do."""

    workload: str
    world: int = 2
    shape: str | None = None
    evaluations: int = 40
    run_dir: str | None = None
    resume: bool = False
    seed: int = 0
    model: str | None = None
    budget_usd: float = 5.0
    progress: bool = True
    batch_size: int = 8
    islands: int = 4


@attrs.frozen
class RunSummary:
    """The outcome of a run: enough to print, to store as JSON, and to find the run again."""

    workload: str
    run_dir: Path
    measured: bool
    evaluated: int
    counts: dict[str, int]
    best: Candidate | None
    fastpath: Candidate | None
    environment: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        def cand(c: Candidate | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {"id": c.id, "point": c.directives.label() if c.directives else None, "mutation": c.mutation,
                    "status": c.status, "fitness": c.fitness, "metrics": dict(c.metrics), "feedback": c.feedback}

        return {"workload": self.workload, "run_dir": str(self.run_dir), "measured": self.measured,
                "evaluated": self.evaluated, "counts": self.counts, "best": cand(self.best),
                "fastpath": cand(self.fastpath), "environment": self.environment}

    def text(self) -> str:
        lines = [f"cuco run {self.workload}: {self.evaluated} candidates evaluated "
                 f"({', '.join(f'{k} {v}' for k, v in sorted(self.counts.items()))})"]
        if self.fastpath is not None:
            lines.append(f"fast path: {self.fastpath.status}; {self.fastpath.feedback.splitlines()[0] if self.fastpath.feedback else ''}")
        if not self.measured:
            lines.append("No GPU group for this world size here: every candidate was statically checked and "
                         "compiled; nothing was verified or timed.")
        elif self.best is None:
            lines.append("No candidate passed verification and timing; see the run database for the reasons.")
        else:
            m = self.best.metrics
            point = self.best.directives.label() if self.best.directives else f"({self.best.mutation})"
            lines.append(f"best point   {point}")
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


def _run_dir(opts: RunOptions) -> Path:
    if opts.run_dir:
        return Path(opts.run_dir)
    if opts.resume:
        raise CucoError("--resume needs --run-dir DIR naming the run to continue")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{opts.workload}-{stamp}"


def _check_options(opts: RunOptions) -> None:
    """Reject option values that cannot make a run, before anything is built or written."""
    if opts.evaluations < 1:
        raise CucoError(f"--evals must be >= 1, got {opts.evaluations}")
    if opts.world < 1:
        raise CucoError(f"--world must be >= 1 (ranks, one GPU each), got {opts.world}")
    if not opts.budget_usd >= 0:  # also rejects NaN
        raise CucoError(f"--budget-usd must be >= 0, got {opts.budget_usd}")


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


def _fastpath_candidate(workload: Any, space: Any) -> Candidate:
    """The host seed through the rule-based fast path, as a candidate at the conservative point."""
    from cuco.fastpath.agent import FastPathAgent

    result = FastPathAgent(llm=None, check_input=False, run_on_gpu=False).run(workload.seed_code())
    # no directive label: the template's conservative point is evaluated by the search as its own candidate
    return Candidate(code=result.code, workload=workload.name, directives=None, mutation="fastpath",
                     feedback="; ".join(result.rules_applied) if result.rules_applied else "")


def run_workload(opts: RunOptions, on_event: Callable[[str], None] = print) -> RunSummary:
    """Run (or resume) the main job and return its summary; also writes summary.json in the run directory."""
    from cuco import workloads
    from cuco.db import CandidateDB
    from cuco.evaluate.cascade import Cascade
    from cuco.search import api

    workload = workloads.get(opts.workload)
    _check_options(opts)
    shape = workload.parse_shape(opts.shape) if opts.shape else None
    run_dir = _run_dir(opts)
    db_path = run_dir / api.DB_FILE
    if opts.resume and not db_path.exists():
        raise CucoError(f"{run_dir} holds no run to resume; drop --resume to start one there")
    if not opts.resume and db_path.exists():
        raise CucoError(f"{run_dir} already holds a run; pass --resume to continue it or choose another --run-dir")
    _check_run_dir(run_dir)
    cascade = Cascade(workload, world=opts.world, bench_shape=shape)
    measured = cascade.has_gpu
    # one host, no RDMA NIC visible to NCCL: GIN cannot run, so a measured search stays on LSA
    topology = Topology(world=opts.world, nodes=1, gin_available=False if measured else None)
    space = workload.space(topology)
    _make_run_dir(run_dir)
    on_event(f"cuco: {workload.name} at world {opts.world}, shape {cascade.bench_shape}; "
             f"{space.size()} legal points; {'GPU cascade' if measured else 'no GPU: static check + compile only'}")

    llm = None
    if opts.model:
        from cuco.llm import LLMConfig

        llm = LLMConfig(models=opts.model, budget_usd=opts.budget_usd)

    fast = None
    if not opts.resume:
        on_event("cuco: fast path (rule-based, no LLM) on the host seed ...")
        fast = cascade.evaluate([_fastpath_candidate(workload, space)])[0]
        on_event(f"cuco: fast path candidate: {fast.status}. {fast.feedback.splitlines()[0] if fast.feedback else ''}")
        search = api.start(run_dir, workload, cascade, space=space, llm=llm, progress=_progress(opts.progress),
                           seed=opts.seed, batch_size=opts.batch_size, islands=opts.islands,
                           max_in_flight=max(8, opts.batch_size))
        search.db.add(fast)
    else:
        search = api.resume(run_dir, workload, cascade, llm=llm, progress=_progress(opts.progress))
    result = search.run(opts.evaluations)

    db = CandidateDB(db_path)
    try:
        every = db.all(workload.name)
        counts = db.count_by_status()
        best = db.best(workload.name)
        fast = fast or next((c for c in every if c.mutation == "fastpath"), None)
    finally:
        db.close()
    env: dict[str, Any] = {}
    if best is not None and "bench" in best.results:
        data = best.results["bench"].data
        env = {k: data.get(k) for k in ("device", "nccl_version", "cuda_runtime_version", "driver_version", "date",
                                        "shape", "world", "iters")}
    summary = RunSummary(workload.name, run_dir, measured, len(every), dict(counts), best, fast, env)
    tmp = run_dir / f".summary.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({**summary.to_dict(), "evaluator": result.evaluator_kind}, indent=2, default=str))
    os.replace(tmp, run_dir / "summary.json")
    return summary
