"""What every mutator receives and raises."""

from __future__ import annotations

from typing import Mapping, Sequence

import attrs

from cuco.candidate import Candidate
from cuco.design_space import DesignSpace
from cuco.errors import CucoError
from cuco.problem import Problem


class MutationError(CucoError):
    """A mutator could not produce a usable child (the loop records it and falls back to another operator).

    cost_usd: what the failed attempt spent on LLM calls (kept for the run's accounting)."""

    def __init__(self, message: str, cost_usd: float = 0.0):
        super().__init__(message)
        self.cost_usd = cost_usd


@attrs.frozen
class MutationContext:
    """A snapshot of the search taken when a proposal is planned, so the proposal is a pure function of it.

    seen: labels of directive points already evaluated or queued. value_scores: the mean fitness reached with
    each directive value so far (a separable surrogate that guides neighbour choice). key: a stable name of this proposal (its
    evaluation index and attempt), used to seed the LLM replay cache.
    """

    workload: Problem
    space: DesignSpace
    island: int = 0
    seen: frozenset[str] = attrs.field(factory=frozenset, converter=frozenset)
    inspirations: tuple[Candidate, ...] = attrs.field(default=(), converter=tuple)
    recommendations: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    scratchpad: str = ""
    temperature: float = 0.0
    key: str = ""
    value_scores: Mapping[str, float] = attrs.field(factory=dict)  # "name=value" -> mean fitness seen with it
    island_note: str = ""  # the island's own prompt note (IslandSpec.prompt)

    def with_seen(self, more: Sequence[str]) -> "MutationContext":
        """A copy with the labels `more` added to `seen`."""
        return attrs.evolve(self, seen=self.seen | set(more))
