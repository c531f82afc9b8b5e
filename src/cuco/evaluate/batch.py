"""Batch: the candidates a runner evaluates together, keyed by candidate id.

Levels record results by id, never by position: a level that reorders, splits or drops candidates (one harness
process per GPU group, a pool of compiles, a Ray task per candidate) cannot put one candidate's record on another.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from cuco.candidate import Candidate, LevelResult
from cuco.errors import CucoError


class DuplicateIdError(CucoError):
    """Two candidates of one batch share an id, so their records could not be told apart."""


class Batch:
    """Candidates in input order, each looked up and updated by its id; `candidates()` gives them back in order."""

    def __init__(self, candidates: Iterable[Candidate]):
        self._by_id: dict[str, Candidate] = {}
        positions: dict[str, int] = {}
        for k, c in enumerate(candidates):
            if c.id in positions:
                raise DuplicateIdError(
                    f"candidates {positions[c.id]} and {k} of one batch share the id {c.id}: results are recorded "
                    "by candidate id, so give each candidate its own id (make a variant with Candidate.child(...) "
                    "or a fresh Candidate(...); evolve() keeps the id)")
            positions[c.id] = k
            self._by_id[c.id] = c

    @classmethod
    def fresh(cls, candidates: Iterable[Candidate]) -> "Batch":
        """A batch of copies of `candidates` with no results, metrics, fitness or feedback yet."""
        return cls(c.evolve(results={}, metrics={}, fitness=None, feedback="") for c in candidates)

    @property
    def ids(self) -> list[str]:
        """Every candidate's id, in input order."""
        return list(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __contains__(self, cid: object) -> bool:
        return cid in self._by_id

    def __getitem__(self, cid: str) -> Candidate:
        return self._by_id[self._known(cid)]

    def in_order(self, ids: Iterable[str]) -> list[str]:
        """`ids` (any iterable, a set too) in input order."""
        wanted = {self._known(cid) for cid in ids}
        return [cid for cid in self._by_id if cid in wanted]

    def candidates(self, ids: Iterable[str] | None = None) -> list[Candidate]:
        """The candidates in input order: all of them, or those `ids` names."""
        return [self._by_id[cid] for cid in (self.ids if ids is None else self.in_order(ids))]

    # -- updates: each replaces the candidate of one id with an updated copy (candidates are immutable) ------
    def record(self, cid: str, result: LevelResult) -> None:
        """Record `result` on candidate `cid`, replacing an earlier result of its level."""
        self._by_id[cid] = self[cid].with_result(result)

    def measure(self, cid: str, metrics: Mapping[str, float], fitness: float | None) -> None:
        """Set candidate `cid`'s metrics and fitness."""
        self._by_id[cid] = self[cid].evolve(metrics=dict(metrics), fitness=fitness)

    def put(self, c: Candidate) -> None:
        """Replace the candidate of `c.id` with `c` (a runner that evaluates elsewhere hands back whole copies)."""
        self._by_id[self._known(c.id)] = c

    def _known(self, cid: str) -> str:
        if cid not in self._by_id:
            raise KeyError(f"candidate {cid} is not in this batch")
        return cid
