"""The CandidateEvaluator interface the search talks to."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from cuco.candidate import Candidate


@runtime_checkable
class CandidateEvaluator(Protocol):
    """Runs candidates through cascade levels and returns them with results, metrics and fitness.

    `kind` is 'measured' for the GPU cascade and 'modelled' for a CPU cost model; reports must show it.
    Evaluators never raise for a bad candidate: the failure is recorded on the candidate.
    """

    kind: str

    def evaluate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates with their level results, metrics and fitness, in the order given."""
