"""The cascade of levels every measured runner shares: static -> compile -> verify -> bench.

`Cascade` runs the levels in order over a batch, keeps each candidate's stage events and records, and marks
verify and bench as not run here on a machine without GPUs; a runner (the plugin harness's Evaluator, a
program's ProgramEvaluator) fills in what each level does. Every level leaves a LevelResult on the candidate,
never an exception.
"""

from __future__ import annotations

import abc
from typing import Callable, Iterable, Mapping, Sequence

from cuco.candidate import NOT_RUN_HERE, Candidate, LevelResult
from cuco.evaluate.base import StageFn, tell
from cuco.evaluate.executor import Executor

NO_GPU_REASON = "no GPU: not verified or timed"
#: L2 verifies with the communication path held back this long (delayed arrival): a candidate that does not
#: wait for its data reads poison and fails, even at W = 1. 0 turns it off.
DEFAULT_VERIFY_DELAY_US = 2000.0
_DEFAULT_HEADS = {"static": "Rejected by the static check:", "compile": "Does not compile:",
                  "verify": "Verification failed:", "bench": "Benchmark failed:"}


def mark_not_run_here(out: list[Candidate], alive: Sequence[int], executor: Executor) -> None:
    """Record L2 and L3 of the survivors `alive` as not run here (no GPU group): they become 'unmeasured'."""
    for i in alive:
        for level in ("verify", "bench"):
            out[i] = out[i].with_result(LevelResult(level, False, NO_GPU_REASON, 0.0,
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
    `compile_level`, `verify_level` (each takes the batch and the indices alive, records its LevelResult on each
    and returns the indices that passed), `bench_level` (records results, metrics and fitness) and `feedback`.
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
        returned copies (same order). Never raises for a bad candidate."""
        out = _fresh(candidates)
        alive = self._static(out)
        self._tell(out, set(range(len(out))) - set(alive), "done")
        alive = self.compile_level(out, alive)
        if alive and not self.has_gpu:
            mark_not_run_here(out, alive, self.executor)
        elif alive:
            self._tell(out, alive, "verify")
            verified = self.verify_level(out, alive)
            self._tell(out, set(alive) - set(verified), "done")
            if verified:
                self._tell(out, verified, "bench")
                self.bench_level(out, verified)
                self._tell(out, verified, "done")
        return [c.evolve(feedback=self.feedback(c)) for c in out]

    def prepare(self, candidates: Sequence[Candidate], compile: bool = True) -> list[Candidate]:
        """L0 and L1 only (static check, then with `compile` the compile): what a CPU worker does before a GPU
        evaluates (cuco.evaluate.ray_executor). Never raises for a bad candidate."""
        out = _fresh(candidates)
        alive = self._static(out)
        if compile:
            self.compile_level(out, alive)
        return out

    def _static(self, out: list[Candidate]) -> list[int]:
        alive = []
        for i, c in enumerate(out):
            result = self.static_level(c)
            out[i] = c.with_result(result)
            if result.passed:
                alive.append(i)
        return alive

    def _tell(self, out: Sequence[Candidate], indices: Iterable[int], stage: str) -> None:
        tell(self.on_stage, (out[i] for i in sorted(indices)), stage)

    # -- the level bodies ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def static_level(self, c: Candidate) -> LevelResult:
        """L0 of one candidate."""

    @abc.abstractmethod
    def compile_level(self, out: list[Candidate], alive: list[int]) -> list[int]:
        """L1 of the candidates `alive`; the indices that compiled."""

    @abc.abstractmethod
    def verify_level(self, out: list[Candidate], alive: list[int]) -> list[int]:
        """L2 of the candidates `alive`; the indices that verified."""

    @abc.abstractmethod
    def bench_level(self, out: list[Candidate], alive: list[int]) -> None:
        """L3 of the candidates `alive`: their times, metrics and fitness."""

    def feedback(self, c: Candidate) -> str:
        """A short summary for a person or an LLM: the first failure with its reason, or the timing."""
        return failure_feedback(c, {}) or ""


def _fresh(candidates: Sequence[Candidate]) -> list[Candidate]:
    return [c.evolve(results={}, metrics={}, fitness=None, feedback="") for c in candidates]

