"""The evolution loop: plan proposals from the islands, prepare them in threads (LLM calls overlap evaluation),
filter for novelty, store them, evaluate them in batches, and update islands, archive, migration and summary.

Every proposal is stored (status pending) before it is evaluated and updated after, so a run killed at any
point resumes without losing or repeating a candidate: pending ones are evaluated first, and the random
stream of proposal i is derived from (seed, i), never from a process-wide state. Without an LLM a run stops
once every legal point of every island's space is evaluated: anything more could only repeat a measurement.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import random
import threading
import warnings
from pathlib import Path
from typing import Any, Sequence

import attrs

from cuco import runlock
from cuco.candidate import Candidate
from cuco.design_space import DesignSpace
from cuco.errors import CucoError
from cuco.evaluate.base import CandidateEvaluator
from cuco.llm import LLMBudgetError, LLMConfigError
from cuco.search import migration as mig
from cuco.search import selection
from cuco.search.archive import Archive
from cuco.search.config import SearchConfig
from cuco.search.coverage import Coverage
from cuco.search.island import Island, make_islands
from cuco.search.meta import MetaSummarizer, MetaSummary
from cuco.search.mutators.base import MutationContext, MutationError
from cuco.search.mutators.directive import DirectiveMutator
from cuco.search.mutators.llm import LLMMutator
from cuco.search.progress import Tracker, following, make_progress
from cuco.search.result import SearchResult, read_result
from cuco.search.run_state import GenerationStats, RunState, write_run_meta
from cuco.search.schedule import Step
from cuco.problem import Problem


@attrs.frozen
class Mutators:
    """The operators: the directive mutator (always) and an LLM mutator (optional)."""

    directive: DirectiveMutator = attrs.field(factory=DirectiveMutator)
    llm: LLMMutator | None = None


@attrs.frozen
class _Plan:
    index: int
    step: Step
    parent: Candidate
    others: tuple[Candidate, ...]
    ctx: MutationContext


ELITE_SELECTION = selection.PowerLaw(alpha=2.0)
LLM_WARN_AFTER = 8  # failed LLM proposals, none usable, before the run warns that the LLM is not helping


def _rng(seed: int, *parts: Any) -> random.Random:
    return random.Random(":".join(map(str, (seed, *parts))))  # str seeds hash stably across processes


class Search:
    """One search over `space` for `workload`, storing everything in `db` (a CandidateDB)."""

    def __init__(self, workload: Problem, space: DesignSpace, evaluator: CandidateEvaluator, db: Any, *,
                 islands: int | None = None, mutators: Mutators | None = None, schedule: Any = None,
                 seed: int | None = None, config: SearchConfig | None = None, novelty: Any = None,
                 meta: MetaSummarizer | None = None, progress: Any = None, take_lock: bool = True,
                 **overrides: Any):
        changes = dict(overrides)
        if islands is not None:
            changes["islands"] = islands
        if schedule is not None:
            changes["schedule"] = schedule
        if seed is not None:
            changes["seed"] = seed
        self.config = (config or SearchConfig()).with_settings(**changes)
        self.workload, self.space, self.evaluator, self.db = workload, space, evaluator, db
        # False where the caller holds the run directory's lock for the search's whole life (cuco.run.Run)
        self.take_lock = take_lock
        self.config.check_space(space)
        self._spaces = [self.config.spec(i).space(space) for i in range(self.config.islands)]
        self.mutators = mutators or Mutators()
        self.novelty = novelty or self.config.novelty
        self.summarizer = meta or MetaSummarizer(every=self.config.meta_every)
        self.progress = make_progress(progress)
        self._tracker: Tracker | None = None
        self._llm_off = threading.Event()
        self._llm_note = ""
        self._llm_warned = False
        self._coverage: Coverage | None = None  # enumerated on first need: an LLM run never needs it
        check = getattr(self.mutators.llm.client, "check", None) if self.mutators.llm is not None else None
        if check is not None:
            check()  # unknown model, missing API key, no price under a cap: said now, not after the seeds
        write_run_meta(db, workload.name, space, self.config, evaluator.kind)  # raises on another run's dir

    # -- state ---------------------------------------------------------------------------------------------
    def _restore(self) -> None:
        self.islands: list[Island] = make_islands(self.config.islands, self.config.island_capacity)
        self.archive = Archive(self.config.archive_axes, top_k=max(self.config.inspirations, 1) * 2)
        self.state = RunState.load(self.db)
        self.all: list[Candidate] = self.db.all(self.workload.name)
        self.children: dict[str, int] = {}
        for c in self.all:
            self._absorb(c)
        by_id = {c.id: c for c in self.all}
        for _gen, moves in self.state.migrations:
            mig.apply(self.islands, [mig.Move(*m) for m in moves], by_id)
        if self.state.llm_disabled:
            self._llm_off.set()
        self._llm_note = self.state.llm_note

    def _absorb(self, c: Candidate) -> None:
        if c.parent_id:
            self.children[c.parent_id] = self.children.get(c.parent_id, 0) + 1
        if c.status != "pending":
            self.islands[c.island % len(self.islands)].add(c)
            self.archive.add(c)

    def _seen(self) -> set[str]:
        return {c.directives.label() for c in self.all if c.directives is not None}

    def _value_scores(self) -> dict[str, float]:
        """Mean fitness of the passed candidates with each directive value (failures count as zero)."""
        sums: dict[str, list[float]] = {}
        for c in self.all:
            if c.status != "pending" and c.directives is not None:
                for name, value in c.directives.to_dict().items():
                    sums.setdefault(f"{name}={value}", []).append(c.fitness if Island.eligible(c) else 0.0)
        return {k: sum(v) / len(v) for k, v in sums.items()}

    def _best(self) -> Candidate | None:
        ranked = [c for c in self.all if Island.eligible(c)]
        return min(ranked, key=lambda c: (-c.fitness, c.created_at, c.id)) if ranked else None  # type: ignore[operator]

    def _llm_on(self) -> bool:
        return self.mutators.llm is not None and not self._llm_off.is_set()

    def _offline(self) -> Coverage | None:
        """The islands' legal points, while no LLM is on (an LLM may write new code at a seen point)."""
        if self._llm_on():
            return None
        if self._coverage is None:
            self._coverage = Coverage.of(self._spaces)
        return self._coverage

    def _exhausted(self, extra_seen: Sequence[str] = ()) -> bool:
        cover = self._offline()
        return cover is not None and cover.exhausted(self._seen() | set(extra_seen))

    def _island_of(self, index: int, extra_seen: Sequence[str] = ()) -> int:
        cover = self._offline()  # offline, an island with no unseen point left hands its turn on
        return index % len(self.islands) if cover is None else cover.island_for(index, self._seen() | set(extra_seen))

    # -- planning (main thread: a deterministic function of the stored state and the index) ----------------
    def _plan(self, index: int, total: int, extra_seen: Sequence[str] = ()) -> _Plan:
        rng = _rng(self.config.seed, index, "plan")
        island = self.islands[self._island_of(index, extra_seen)]
        step = self.config.schedule.step(index, total, rng, self._llm_on())
        members = island.members()
        space = self._spaces[island.index]
        elites = [c for c in self.archive.top()  # an island with its own backend exploits only its own elites
                  if space is self.space or (c.directives is not None and space.is_legal(c.directives))]
        if step.op == "directive_near" and elites:
            # offline exploitation: unseen neighbours of the run's elites, the best most often
            parent = selection.select(ELITE_SELECTION, elites, rng)
        elif members:
            parent = selection.select(self.config.selection, members, rng, lambda i: self.children.get(i, 0))
        else:
            own = [c for c in self.all if c.island == island.index]
            parent = self._best() or (own[-1] if own else self.all[-1])
        others = tuple(self.archive.inspirations(2, rng, exclude=(parent.id,))[: rng.choice((1, 2))])
        insp = tuple(self.archive.inspirations(self.config.inspirations, rng, exclude=(parent.id,)))
        summary = self.state.summary
        ctx = MutationContext(self.workload, space, island.index, frozenset(self._seen() | set(extra_seen)),
                              insp, summary.recommendations, summary.scratchpad, step.temperature,
                              key=f"{self.config.seed}:{index}", value_scores=self._value_scores(),
                              island_note=self.config.spec(island.index).prompt)
        self.children[parent.id] = self.children.get(parent.id, 0) + 1
        return _Plan(index, step, parent, others, ctx)

    def _seed_candidate(self, index: int, extra_seen: Sequence[str] = ()) -> Candidate:
        rng = _rng(self.config.seed, index, "seed")
        seen = self._seen() | set(extra_seen)
        island = self._island_of(index, extra_seen)
        space = self._spaces[island]
        point = self.config.spec(island).start_point(self.space)  # the fast path's point unless the island has its own
        if point.label() in seen:
            point = next((p for p in (space.sample(rng) for _ in range(64)) if p.label() not in seen), None) \
                or rng.choice([p for p in space.points() if p.label() not in seen] or [space.sample(rng)])
        return Candidate(code=self.workload.render(point, self.space.topology), workload=self.workload.name,
                         directives=point, island=island, mutation="seed")

    # -- proposing (worker threads: pure functions of the plan) --------------------------------------------
    def _propose(self, plan: _Plan, attempt: int = 0) -> tuple[Candidate, str]:
        rng = _rng(self.config.seed, plan.index, attempt, "op")
        ctx = attrs.evolve(plan.ctx, key=f"{plan.ctx.key}:{attempt}")
        op = plan.step.op
        llm = self.mutators.llm
        if op.startswith("llm_") and llm is not None and not self._llm_off.is_set():
            try:
                if op == "llm_diff":
                    return llm.diff(plan.parent, ctx, rng), op
                if op == "llm_full":
                    return llm.full(plan.parent, ctx, rng), op
                if plan.others:
                    return llm.cross(plan.parent, plan.others, ctx, rng), op
                return llm.full(plan.parent, ctx, rng), "llm_full"
            except LLMBudgetError:
                self._llm_off.set()  # the cap is reached: the rest of the run is offline
                op = "budget_fallback"
            except LLMConfigError as exc:
                self._llm_note = f"{exc}"
                self._llm_off.set()  # the configuration cannot work: asking again would fail the same way
                op = "llm_config_fallback"
            except MutationError as exc:
                self._llm_note = f"{exc}"[:500]
                op = "llm_failed_fallback"
        d = self.mutators.directive
        phase = plan.step.phase
        if op == "directive_sample":
            return d.sample(plan.parent, ctx, rng), op
        if op == "directive_far":
            return d.far(plan.parent, ctx, rng), op
        if op == "directive_cross" and plan.others:
            return d.crossover(plan.parent, plan.others[0], ctx, rng), op
        if op.endswith("fallback") and phase == "explore":
            return d.far(plan.parent, ctx, rng), op
        return d.near(plan.parent, ctx, rng), op

    # -- the run -------------------------------------------------------------------------------------------
    def run(self, n_evaluations: int) -> SearchResult:
        """Evaluate until the run holds `n_evaluations` evaluated candidates (a resumed run counts earlier ones) or,
        without an LLM, no legal point is left unevaluated (then the result says `exhausted`)."""
        if n_evaluations < 1:
            raise CucoError(f"n_evaluations must be >= 1, got {n_evaluations}")
        path = getattr(self.db, "path", None)
        lock = runlock.held(Path(path).parent) if path is not None and self.take_lock else contextlib.nullcontext()
        with lock:  # one writer per run directory; readers take no lock
            self._restore()
            evaluated = sum(1 for c in self.all if c.status != "pending")
            if n_evaluations < evaluated:
                raise CucoError(f"asked for {n_evaluations} evaluations but the run already holds {evaluated}; ask "
                                f"for {evaluated} or more (the run was started for {self.state.total or n_evaluations})")
            self._tracker = Tracker(self.progress, n_evaluations, evaluated) if self.progress is not None else None
            try:
                with following(self.evaluator, self._tracker):
                    return self._run(n_evaluations)
            finally:
                if self.progress is not None and hasattr(self.progress, "close"):
                    self.progress.close()

    def _run(self, total: int) -> SearchResult:
        self.state = attrs.evolve(self.state, total=total)
        pending = [c for c in self.all if c.status == "pending"]
        for i in range(0, len(pending), self.config.batch_size):  # stored before a kill: evaluate, never redo
            self._evaluate_batch(pending[i:i + self.config.batch_size], {}, total)
        while len(self.all) < min(self.config.islands, total) and not self._exhausted():
            batch: list[Candidate] = []
            for i in range(min(self.config.islands, total, len(self.all) + self.config.batch_size) - len(self.all)):
                if self._exhausted([c.directives.label() for c in batch]):
                    break
                batch.append(self._seed_candidate(len(self.all) + i, [c.directives.label() for c in batch]))
            for c in batch:
                self.db.add(c)
            self.all.extend(batch)
            self._evaluate_batch(batch, {"seed": len(batch)}, total)
        with cf.ThreadPoolExecutor(max_workers=self.config.max_in_flight, thread_name_prefix="cuco-propose") as pool:
            futures: dict[int, tuple[_Plan, cf.Future]] = {}
            next_index = len(self.all)
            while len(self.all) < total and not self._exhausted():
                # offline proposals cost nothing to prepare: plan them just in time so each batch sees every
                # earlier result; LLM proposals are prepared max_in_flight ahead to hide their latency
                ahead = self.config.max_in_flight if self._llm_on() else self.config.batch_size
                while len(futures) < ahead and next_index < total:
                    plan = self._plan(next_index, total)
                    futures[next_index] = (plan, pool.submit(self._propose, plan))
                    next_index += 1
                ids = sorted(futures)[: self.config.batch_size]
                batch, ops = self._collect([futures.pop(i) for i in ids], total)
                for c in batch:
                    self.db.add(c)  # stored as pending first: a kill now loses nothing
                self.all.extend(batch)
                self._evaluate_batch(batch, ops, total)
                if next_index < len(self.all):
                    next_index = len(self.all)
            for _plan, fut in futures.values():
                fut.cancel()
        self._stop_if_exhausted(total)
        return self.result()

    def _stop_if_exhausted(self, total: int) -> None:
        """Record whether the run stopped short of `total` for want of unseen points; a finished bar ends there."""
        evaluated = sum(1 for c in self.all if c.status != "pending")
        exhausted = evaluated < total and self._exhausted()
        if exhausted or self.state.exhausted:  # stored, so a resume says the same (and one that went on, not)
            self.state = attrs.evolve(self.state, exhausted=exhausted)
            self.state.save(self.db)
        if exhausted and self._tracker is not None:
            self._tracker.end(evaluated, self.state.exhausted_note(evaluated))

    def _collect(self, items: list[tuple[_Plan, cf.Future]], total: int) -> tuple[list[Candidate], dict[str, int]]:
        """Finished proposals in index order, each novel against the evaluated ones and its batch-mates."""
        batch: list[Candidate] = []
        ops: dict[str, int] = {}
        recent = [c for c in self.all if c.status != "pending"][-self.novelty.window:]
        cover = self._offline()
        for plan, fut in items:
            taken = [c.directives.label() for c in batch if c.directives]
            seen = self._seen() | set(taken)
            if cover is not None and cover.exhausted(seen):
                break  # the batch holds the last unseen points: proposing more could only repeat one
            child, op = fut.result()
            for attempt in range(1, self.novelty.max_resamples + 1):
                if self.novelty.check(child, [*recent, *batch], seen) is None:
                    break
                replan = attrs.evolve(plan, ctx=attrs.evolve(plan.ctx, seen=frozenset(seen)))
                if cover is not None and not cover.open(plan.ctx.island, seen):  # batch-mates took its last points
                    replan = self._plan(plan.index, total, taken)
                child, op = self._propose(replan, attempt)
            batch.append(child)
            ops[op] = ops.get(op, 0) + 1
        return batch, ops

    def _evaluate_batch(self, batch: list[Candidate], ops: dict[str, int], total: int) -> None:
        if not batch:
            return
        before = sum(1 for c in self.all if c.status != "pending")
        if self._tracker is not None:
            phase = self.config.schedule.phase(before, total).name
            self._tracker.begin(batch, self.state.generation + 1, phase, self._best())
        done = {c.id: c for c in self.evaluator.evaluate(batch)}
        missing = [c.id for c in batch if c.id not in done]
        if missing:
            raise CucoError(f"evaluator {type(self.evaluator).__name__} returned no result for {missing}; an CandidateEvaluator "
                            "returns every candidate it is given")
        index = {c.id: i for i, c in enumerate(self.all)}
        for c in batch:
            out = done[c.id]
            self.db.upsert(out)
            self.all[index[c.id]] = out
            self._absorb_evaluated(out)
        if self._tracker is not None:
            self._tracker.finish(batch, self._best())
        self._after_generation(batch, done, ops, before, total)

    def _absorb_evaluated(self, c: Candidate) -> None:
        if c.status != "pending":
            self.islands[c.island % len(self.islands)].add(c)
            self.archive.add(c)

    def _after_generation(self, batch: list[Candidate], done: dict[str, Candidate], ops: dict[str, int],
                          before: int, total: int) -> None:
        gen = self.state.generation + 1
        migrations = list(self.state.migrations)
        if self.config.migration.due(gen):
            moves = self.config.migration.plan(self.islands, _rng(self.config.seed, "migrate", gen))
            mig.apply(self.islands, moves)
            migrations.append((gen, [m.to_list() for m in moves]))
        evaluated = sum(1 for c in self.all if c.status != "pending")
        summary = self.state.summary
        if self.summarizer.due(before, evaluated):
            client = self.mutators.llm.client if self._llm_on() and self.mutators.llm else None
            kwargs = self.mutators.llm.completion_kwargs if client is not None else {}
            summary = self.summarizer.summarize(self.all, self.space, client, _rng(self.config.seed, "meta", gen),
                                                key=str(gen), **kwargs)
        best = self._best()
        fits = [done[c.id].fitness for c in batch if done[c.id].fitness is not None]
        phase = self.config.schedule.phase(max(evaluated - 1, 0), total).name
        stats = GenerationStats(gen, evaluated, phase, best.fitness if best else None, max(fits) if fits else None,
                                dict(ops), sum(1 for c in batch if done[c.id].failed))
        self.state = attrs.evolve(self.state, generation=gen, migrations=tuple(migrations), summary=summary,
                                  history=(*self.state.history, stats), llm_disabled=self._llm_off.is_set(),
                                  llm_note=self._llm_note)
        self.state.save(self.db)
        self._warn_if_llm_useless()
        if self._tracker is not None:
            self._tracker.generation(evaluated, gen, phase, best)

    def _warn_if_llm_useless(self) -> None:
        usable, failed = self.state.llm_counts()
        if self.mutators.llm is not None and not usable and failed >= LLM_WARN_AFTER and not self._llm_warned:
            self._llm_warned = True
            warnings.warn(f"cuco search: {self.state.llm_notes()[0]}", RuntimeWarning, stacklevel=3)

    def result(self) -> SearchResult:
        """The outcome so far, read from the database."""
        return read_result(self.db, self.workload.name, self.evaluator.kind)

    @property
    def summary(self) -> MetaSummary:
        """The latest meta-summary, as stored in the database."""
        return RunState.load(self.db).summary
