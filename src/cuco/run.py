"""The owner of one run: open -> seed -> search -> summary -> close. `cuco run` and `cuco.run_workload` go
through it; every option is read once, here.

What is run: a built-in workload by name, a workload folder outside the package, or a user's host program
(`.cu`, cuco.program), as cuco.target resolves it. Order, so that a kill at any
point loses at most the step in flight: checks (nothing written; for a program also its reference, built and run
twice), the run lock, manifest.json, the candidate database, the fast path (stored before it is evaluated), the
search, summary.json and best/.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any, Callable

import attrs

from cuco import atomic, reference_best, rundir, runlock
from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.design_space import Topology
from cuco.errors import CucoError
from cuco.events_log import FILE as EVENTS_FILE
from cuco.events_log import EventLog
from cuco.kit.compute import BUILD_LOG
from cuco.manifest import RunManifest
from cuco.problem import Problem, Runner
from cuco.run_checks import check_gpus, check_resume, check_run_dir, make_manifest, make_run_dir
from cuco.run_options import DEFAULT_BUDGET_USD, DEFAULT_EVALUATIONS, RunOptions, check_options, run_budget, run_dir_of
from cuco.run_summary import RunSummary, point_of
from cuco.target import load_workload_folder, resolve

__all__ = ["DEFAULT_BUDGET_USD", "DEFAULT_EVALUATIONS", "Run", "RunOptions", "RunSummary", "load_workload_folder",
           "parent_code_from", "point_of", "resolve", "run_workload", "write_best"]

BEST_DIR = "best"
#: What summary.json's "environment" takes from the best candidate's timing run (docs/run_dir.md).
ENVIRONMENT_KEYS = ("device", "nccl_version", "cuda_runtime_version", "driver_version", "driver_release", "date",
                    "shape", "world", "iters", "runs")
log = logging.getLogger("cuco")


class Run:
    """One run in its directory. Use `Run.open(opts)` as a context manager, then `seed()`, `search()`,
    `summary()`; `close()` (or leaving the `with`) releases the database and the lock."""

    def __init__(self, opts: RunOptions, on_event: Callable[[str], None] | None = None):
        self.opts, self.on_event = opts, on_event or log.info
        self._stack = contextlib.ExitStack()
        self.workload: Any = None   # the run's Problem: a workload or a user's program, never told apart
        self.runner: Runner | None = None   # the local runner: the manifest's toolchain, the original's checks
        self.evaluator: Any = None   # what the search evaluates with: the local runner or the remote one
        self.search_loop: Any = None
        self.db: Any = None   # the run's CandidateDB, opened once under the lock
        self.fast: Candidate | None = None
        self.first: list[Any] = []   # the points --try names, checked against the run's space when it opens

    # -- open ------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, opts: RunOptions, on_event: Callable[[str], None] | None = None) -> "Run":
        """The run of `opts`, opened (workload, run directory, lock, database); closed again if opening fails.
        Its messages go to `on_event`, by default the "cuco" logger at INFO."""
        run = cls(opts, on_event)
        try:
            run._open()
        except BaseException:
            run.close()
            raise
        return run

    def _open(self) -> None:
        opts = self.opts
        workload = self.workload = resolve(opts.workload, opts.build, opts.launcher)
        check_options(opts)
        self.run_dir = run_dir = run_dir_of(attrs.evolve(opts, workload=workload.name))
        check_run_dir(run_dir)
        found = rundir.probe(run_dir)
        rundir.check_start(found, opts.resume)
        stored = found.manifest
        world = opts.world if opts.world is not None else stored.world if stored else workload.default_world
        seed = opts.seed if opts.seed is not None else stored.seed if stored else 0
        evaluations = opts.evaluations or (stored.evaluations if stored else DEFAULT_EVALUATIONS)
        self.budget_usd = run_budget(opts, stored)
        evaluation, runner, remote = self._runners(world, stored)
        manifest = make_manifest(workload, runner, seed, evaluations, self.budget_usd)
        if stored is not None:
            check_resume(stored, manifest, opts, found.evaluated)
        # one host, no RDMA NIC visible to NCCL: GIN cannot run, so a measured search stays on LSA
        self.topology = Topology(world=world, nodes=1, gin_available=False if evaluation == "measured" else None)
        space = workload.space(self.topology)
        self.first = first_points(opts.first_points, space)   # refused now, before anything is written
        llm = self._llm(run_dir)
        runner.check_original(evaluation == "measured")   # said now, before anything is written
        make_run_dir(run_dir)
        self._stack.enter_context(runlock.held(run_dir))   # the one lock of the run, held until close()
        # from here on every message and every candidate's stage move is also in RUN_DIR/events.log
        events = EventLog(run_dir / EVENTS_FILE)
        self.on_event = events.messages(self.on_event)
        self._stack.enter_context(events.logging_from(BUILD_LOG.name))   # e.g. a compute library's minutes
        if RunManifest.read(run_dir) != stored:  # another process started or changed it meanwhile
            raise CucoError(f"{run_dir} was changed by another cuco process while this one started; retry")
        if stored is None:
            manifest.write(run_dir)
        elif (stored.evaluations, stored.budget_usd) != (evaluations, self.budget_usd):
            # a resume that extends the run or changes its cap: the rest stays as started
            attrs.evolve(stored, evaluations=evaluations, budget_usd=self.budget_usd).write(run_dir)
        scale = f", {runner.scale}" if runner.scale else ""
        self.on_event(f"cuco: {workload.name} at world {world}{scale}; {space.size()} legal points; "
                      f"{'GPU cascade' if evaluation == 'measured' else 'no GPU: static check + compile only'}")
        self.evaluation, self.evaluations = evaluation, evaluations
        self.runner, self.evaluator = runner, remote if remote is not None else runner
        self.evaluator.on_stage = events.stage
        # the one database of the run: the search, the fast path and the summary all use this connection
        self.db = CandidateDB(run_dir / rundir.DB_FILE)
        self._stack.callback(self.db.close)
        self.search_loop = self._open_search(space, llm, seed)
        # L0 compares frozen regions with the parent's, wherever the evaluation runs (here or on a Ray worker)
        runner.parent_code = self.evaluator.parent_code = parent_code_from(self.db)

    def _runners(self, world: int, stored: Any) -> tuple[str, Runner, Any]:
        """(evaluation, the local runner, the remote one or None). GPUs before shapes: on a host with too few GPUs
        the fix is --world, whatever the shape says; the cluster's GPUs, not this host's, are checked (and
        refused) before any work."""
        from cuco.evaluate.executor import Executor

        opts = self.opts
        executor = Executor(world=world)
        shape = opts.shape if opts.shape is not None else stored.shape if stored else None
        remote = None
        if opts.executor == "ray":
            remote = self.workload.remote_runner(world, shape, opts.address)
            evaluation = "measured"
        else:
            evaluation = check_gpus(executor, world)
        runner = self.workload.runner(world, shape, executor)
        self._stack.callback(runner.close)
        return evaluation, runner, remote

    def _llm(self, run_dir: Path) -> Any:
        """The run's one LLM client (None without --model), checked now: the search uses it as it is."""
        opts = self.opts
        if not opts.model:
            return None
        from cuco.llm import LLMConfig
        from cuco.search import api

        prices = {opts.model: (opts.price_per_mtok[0] / 1e6, opts.price_per_mtok[1] / 1e6)} \
            if opts.price_per_mtok else {}
        client = api.llm_client(LLMConfig(models=opts.model, budget_usd=self.budget_usd, prices=prices), run_dir)
        client.check()  # unknown model, missing key or price: said now, before anything is written
        return client

    def _open_search(self, space: Any, llm: Any, seed: int) -> Any:
        """Resumed where the database holds a search, else started (a start killed before its database got the
        run's identity starts again)."""
        from cuco.search import api

        opts = self.opts
        return api.open_search(self.db, self.workload, self.evaluator, space=space, llm=llm,
                               progress="auto" if opts.progress else None, seed=seed, batch_size=opts.batch_size,
                               islands=opts.islands, max_in_flight=max(8, opts.batch_size))

    # -- seed, search ----------------------------------------------------------------------------------
    def seed(self) -> Candidate:
        """The fast path's candidate: stored in the run already, else made (workloads: from the cache), stored
        pending, evaluated and stored again."""
        db, workload = self.db, self.workload
        fast = next((c for c in db.all(workload.name) if c.mutation == "fastpath"), None)
        if fast is None:
            fast = workload.seed(self.topology, self.run_dir / "fastpath-work", self.on_event)
            db.add(fast)
        if fast.status == "pending":
            fast = self.evaluator.evaluate([fast])[0]
            db.upsert(fast)
            from cuco.evaluate.levels import feedback_headline

            self.on_event(f"cuco: fast path candidate: {fast.status}. {feedback_headline(fast.feedback)}")
        self.fast = fast
        return fast

    def try_first(self) -> list[Candidate]:
        """The run's first points (RunOptions.first_points) that it does not hold yet, within its evaluations:
        rendered, stored pending, evaluated as one batch and stored again; the search then steps from them as from
        its own."""
        if not self.first:
            return []
        db, workload = self.db, self.workload
        stored = db.all(workload.name)
        held = {c.directives.label() for c in stored if c.directives is not None}
        room = self.evaluations - len(stored)  # a pending candidate is evaluated too: it takes a place
        todo = [p for p in self.first if p.label() not in held][: max(room, 0)]
        if not todo:
            return []
        cands = [Candidate(code=workload.render(p, self.topology), workload=workload.name, directives=p,
                           mutation="manual") for p in todo]
        for c in cands:
            db.add(c)
        done = self.evaluator.evaluate(cands)
        for c in done:
            db.upsert(c)
            self.on_event(f"cuco: first point {c.directives.label()}: {c.status}")
        return done

    def search(self) -> None:
        """Evaluate until the run holds its number of evaluations, or, without an LLM, until every legal point is
        evaluated (then said through on_event)."""
        from cuco.search.run_state import RunState

        result = self.search_loop.run(self.evaluations)
        if result.exhausted:
            self.on_event(f"cuco: {RunState.load(self.db).exhausted_note(result.evaluated)}")

    def confirm(self) -> None:
        """The search's winner re-timed against the reference before it is offered, where the problem does so (a
        user's program: Problem.confirm) and the run was not told not to; the verdict is stored with the candidate,
        so a resumed run does not re-time it again and summary() (best_of) reads it."""
        if not self.opts.confirm or self.evaluation != "measured":
            return
        fastest = self.db.best(self.workload.name)
        if fastest is None:
            return
        confirmed = self.workload.confirm(fastest, self.runner)
        if confirmed is fastest:
            return
        self.db.upsert(confirmed)
        m = confirmed.metrics
        if "record_repeats" not in m:   # the rewrite failed in its fresh rounds (its feedback says how)
            self.on_event(f"cuco: the fastest rewrite failed when re-timed against the reference, not offered: "
                          f"{reference_best.not_offered_reason(confirmed)}")
            return
        self.on_event(f"cuco: the fastest rewrite re-timed against the reference in {int(m['record_repeats'])} fresh "
                      f"rounds: speedup {m['record_speedup']:.3f}, "
                      + ("offered" if m.get("record_faster") else "not offered (the reference stays the best)"))

    # -- summary, close ----------------------------------------------------------------------------------
    def summary(self, note: str = "") -> RunSummary:
        """The run's summary, also written as summary.json; the best verified candidate goes to best/. `note`, if
        given, is added to the summary's notes (e.g. that the run was interrupted)."""
        name, db = self.workload.name, self.db
        every = db.all(name)
        counts = db.count_by_status()
        best = db.best(name) if self.evaluation == "measured" else None
        if best is not None:
            best = self.workload.best_of(best)
        env: dict[str, Any] = {}
        if best is not None and "bench" in best.results:
            data = best.results["bench"].data
            env = {k: data.get(k) for k in ENVIRONMENT_KEYS}
        from cuco.search.run_state import RunState

        state = RunState.load(db)
        done = sum(n for s, n in counts.items() if s != "pending")
        notes = ((state.exhausted_note(done),) if state.exhausted else ()) + ((note,) if note else ())
        summary = RunSummary(name, self.run_dir, self.evaluation, len(every), dict(counts), best, self.fast, env,
                             state.exhausted, notes)
        _write_json(self.run_dir / "summary.json", summary.to_dict())
        if best is not None:
            write_best(self.run_dir, best, self.workload)
        return summary

    def close(self) -> None:
        """Release the database and the lock."""
        self._stack.close()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _write_json(path: Path, data: Any) -> None:
    atomic.write_text(path, json.dumps(data, indent=2, default=str))


def write_best(run_dir: Path, best: Candidate, workload: Problem) -> Path:
    """RUN_DIR/best/: the best verified candidate's source (kernel.cu) and best.json (its point, its time against
    the host program, how it was verified, where and when, and what the problem says of its provenance).
    Replaced whole, never half-written."""
    verify, bench = best.results.get("verify"), best.results.get("bench")
    info = {
        "kind": workload.kind, "workload": workload.name, "candidate_id": best.id,
        "mutation": best.mutation, "point": point_of(best),
        "directives": best.directives.to_dict() if best.directives else None, "metrics": dict(best.metrics),
        "verified": {"verify": verify.to_dict() if verify else None,
                     "bench_runs_verified": bool(bench and bench.passed)},
        "bench": dict(bench.data) if bench else {},
        "source": "kernel.cu",
        **workload.provenance(best),
    }
    final = run_dir / BEST_DIR
    atomic.write_dir(final, {"kernel.cu": best.code, "best.json": json.dumps(info, indent=2, default=str)})
    return final


def run_workload(opts: RunOptions, on_event: Callable[[str], None] | None = None) -> RunSummary:
    """Run (or resume) the main job through its owner (cuco.run.Run) and return its summary; also writes
    summary.json and, when a candidate was verified and timed, best/ in the run directory. Messages go to
    `on_event`, by default the "cuco" logger (logging.getLogger("cuco")) at INFO."""
    with Run.open(opts, on_event) as run:
        try:
            run.seed()
            run.try_first()
            run.search()
            run.confirm()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what was measured so far stays usable (best/, summary.json)
            try:
                run.summary(f"interrupted: best/ and these figures hold what was evaluated before; `cuco run "
                            f"--resume --run-dir {run.run_dir}` continues the run")
            except Exception as exc:  # the interrupt is what the caller must see; the summary's failure is said
                log.warning("cuco: the interrupted run's summary was not written: %s", exc)
            raise
        return run.summary()


def first_points(labels: tuple[str, ...], space: Any) -> list[Any]:
    """The points `labels` name, each checked against the run's space; a malformed or illegal one is refused with
    the reason (CucoError) before the run writes anything."""
    from cuco.design_space import Directives, DirectiveError

    points = []
    for label in labels:
        try:
            point = space.complete(Directives.from_label(label))
        except DirectiveError as exc:
            raise CucoError(f"--try {label}: {exc}") from None
        reason = space.check(point)
        if reason:
            raise CucoError(f"--try {label} is not a legal point of this run's space: {reason} "
                            f"(`cuco space` lists the legal points)")
        points.append(point)
    return points


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
