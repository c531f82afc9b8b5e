"""The cascade of levels every measured runner shares: static -> compile -> verify -> bench.

`Cascade` runs the levels in order over a batch, keeps each candidate's stage events and records, and marks
verify and bench as not run here on a machine without GPUs; a runner (the plugin harness's Evaluator, a
program's ProgramEvaluator) fills in what each level does. Every level leaves a LevelResult on the candidate,
never an exception, recorded by candidate id on the batch (cuco.evaluate.batch.Batch), never by position.
"""

from __future__ import annotations

import abc
from typing import Callable, Iterable, Mapping, Sequence

from cuco.candidate import NOT_RUN_HERE, Candidate, LevelResult
from cuco.evaluate.base import StageFn, tell
from cuco.evaluate.batch import Batch
from cuco.evaluate.executor import Executor

NO_GPU_REASON = "no GPU: not verified or timed"
#: L2 verifies with the communication path held back this long (delayed arrival): a candidate that does not
#: wait for its data reads poison and fails, even at W = 1. 0 turns it off.
DEFAULT_VERIFY_DELAY_US = 2000.0
_DEFAULT_HEADS = {"static": "Rejected by the static check:", "compile": "Does not compile:",
                  "verify": "Verification failed:", "bench": "Benchmark failed:"}


def mark_not_run_here(batch: Batch, alive: Iterable[str], executor: Executor) -> None:
    """Record L2 and L3 of the survivors `alive` (ids) as not run here (no GPU group): they become 'unmeasured'."""
    for cid in alive:
        for level in ("verify", "bench"):
            batch.record(cid, LevelResult(level, False, NO_GPU_REASON, 0.0,
                                          {"gpus": executor.describe(), NOT_RUN_HERE: True}))


def failure_feedback(c: Candidate, heads: Mapping[str, str]) -> str | None:
    """The first failed level of `c` as feedback (`heads` overrides a level's heading), or None if none failed."""
    for level in ("static", "compile", "verify", "bench"):
        res = c.results.get(level)
        if res is None or res.passed:
            continue
        if res.reason == NO_GPU_REASON:
            return f"Static check and compile passed; {NO_GPU_REASON} (no GPU on this machine)."
        return f"{heads.get(level, _DEFAULT_HEADS[level])}\n{res.reason}"
    return None


def feedback_headline(feedback: str, limit: int = 300) -> str:
    """One console line of `feedback`: its heading joined with the first line of the reason that follows it (a
    heading alone, such as 'Does not compile:', tells a user nothing), cut at `limit` characters."""
    lines = [line.strip() for line in feedback.splitlines() if line.strip()]
    if not lines:
        return ""
    text = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Cascade(abc.ABC):
    """The level order, the stage events and the no-GPU rule, shared by every measured runner.

    A runner sets `executor` and `world` and defines the level bodies: `static_level` (one candidate),
    `compile_level`, `verify_level` (each takes the Batch and the ids alive, records its LevelResult on each by
    id and returns the ids that passed, in batch order), `bench_level` (records results, metrics and fitness) and
    `feedback`. A batch whose candidates share an id is refused (DuplicateIdError).
    """

    kind = "measured"
    on_stage: StageFn | None = None   # set by the search to follow candidates through the levels
    parent_code: Callable[[Candidate], str | None] | None = None
    executor: Executor
    world: int

    @property
    def has_gpu(self) -> bool:
        """True when the executor has a GPU group, so verification and timing run here."""
        return self.executor.has_gpu

    @property
    def scale(self) -> str:
        """The size the candidates run at, as the run's first line names it ('' when the problem has its own)."""
        return ""

    def check_original(self, measured: bool) -> None:
        """Check what the candidates are measured against before a run writes anything (nothing by default)."""

    def close(self) -> None:
        """Remove what the runner made for itself (nothing by default)."""

    # -- the CandidateEvaluator protocol ------------------------------------------------------------------
    def evaluate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Run every level each candidate survives; results, metrics, fitness and feedback are set on the
        returned copies (same order). Never raises for a bad candidate; DuplicateIdError for two with one id."""
        batch = Batch.fresh(candidates)
        alive = self._static(batch)
        self._tell(batch, set(batch.ids) - set(alive), "done")
        alive = self.compile_level(batch, alive)
        if alive and not self.has_gpu:
            mark_not_run_here(batch, alive, self.executor)
        elif alive:
            self._tell(batch, alive, "verify")
            verified = self.verify_level(batch, alive)
            self._tell(batch, set(alive) - set(verified), "done")
            if verified:
                self._tell(batch, verified, "bench")
                self.bench_level(batch, verified)
                self._tell(batch, verified, "done")
        return [c.evolve(feedback=self.feedback(c)) for c in batch.candidates()]

    def prepare(self, candidates: Sequence[Candidate], compile: bool = True) -> list[Candidate]:
        """L0 and L1 only (static check, then with `compile` the compile): what a CPU worker does before a GPU
        evaluates (cuco.evaluate.ray_executor). Never raises for a bad candidate."""
        batch = Batch.fresh(candidates)
        alive = self._static(batch)
        if compile:
            self.compile_level(batch, alive)
        return batch.candidates()

    def _static(self, batch: Batch) -> list[str]:
        alive = []
        for cid in batch.ids:
            result = self.static_level(batch[cid])
            batch.record(cid, result)
            if result.passed:
                alive.append(cid)
        return alive

    def _tell(self, batch: Batch, ids: Iterable[str], stage: str) -> None:
        tell(self.on_stage, batch.candidates(ids), stage)

    # -- the level bodies ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def static_level(self, c: Candidate) -> LevelResult:
        """L0 of one candidate."""

    @abc.abstractmethod
    def compile_level(self, batch: Batch, alive: list[str]) -> list[str]:
        """L1 of the candidates `alive` (ids); the ids that compiled."""

    @abc.abstractmethod
    def verify_level(self, batch: Batch, alive: list[str]) -> list[str]:
        """L2 of the candidates `alive` (ids); the ids that verified."""

    @abc.abstractmethod
    def bench_level(self, batch: Batch, alive: list[str]) -> None:
        """L3 of the candidates `alive`: their times, metrics and fitness."""

    def feedback(self, c: Candidate) -> str:
        """A short summary for a person or an LLM: the first failure with its reason, or the timing."""
        return failure_feedback(c, {}) or ""
