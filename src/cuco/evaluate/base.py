"""The CandidateEvaluator interface the search talks to, and the stage events evaluators may report."""

from __future__ import annotations

from typing import Callable, Iterable, Protocol, Sequence, runtime_checkable

from cuco.candidate import Candidate

#: Called as a candidate enters a stage: (candidate id, stage), stage one of STAGES.
StageFn = Callable[[str, str], None]
#: "done": the candidate's result is final (it failed a level, or passed the last level this machine runs).
STAGES = ("compile", "verify", "bench", "done")


@runtime_checkable
class CandidateEvaluator(Protocol):
    """Runs candidates through cascade levels and returns them with results, metrics and fitness.

    `kind` is 'measured' for the GPU cascade and 'modelled' for a CPU cost model; reports must show it.
    Evaluators never raise for a bad candidate: the failure is recorded on the candidate, keyed by its id (a batch
    with two candidates of one id is refused: cuco.evaluate.batch.DuplicateIdError).
    `on_stage` (a StageFn or None) is set by the search to follow each candidate through compile, verify and bench
    while a batch is evaluated; an evaluator without stages leaves it uncalled.
    """

    kind: str
    on_stage: StageFn | None

    def evaluate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates with their level results, metrics and fitness, in the order given."""


def tell(hook: StageFn | None, candidates: Iterable[Candidate], stage: str) -> None:
    """Report that `candidates` entered `stage` to `hook` (nothing when no one listens)."""
    if hook is not None:
        for c in candidates:
            hook(c.id, stage)
