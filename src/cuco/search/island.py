"""Island: one bounded population of evaluated candidates that evolves mostly on its own."""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

import attrs

from cuco.candidate import Candidate
from cuco.design_space import DesignSpace, Directives
from cuco.errors import CucoError


class IslandError(CucoError, ValueError):
    """An island was built or fed with something it cannot hold."""


def rank_key(c: Candidate) -> tuple[float, float, str]:
    """Best first: highest fitness, then earliest created, then id (a total, stable order)."""
    return (-(c.fitness if c.fitness is not None else float("-inf")), c.created_at, c.id)


class Island:
    """The `capacity` best passed candidates seen by this island (its own children and migrants).

    The population is the top `capacity` of everything ever added, so it does not depend on the order of
    `add` calls: a resumed run rebuilds exactly the same islands from the database. The best is never evicted.
    """

    def __init__(self, index: int, capacity: int = 16):
        if index < 0:
            raise IslandError(f"island index must be >= 0, got {index}")
        if capacity < 1:
            raise IslandError(f"island capacity must be >= 1, got {capacity}")
        self.index = index
        self.capacity = capacity
        self._members: list[Candidate] = []

    @staticmethod
    def eligible(c: Candidate) -> bool:
        """Only candidates with a fitness (measured, or modelled in a modelled run) can be parents."""
        return c.ranked

    def add(self, c: Candidate) -> bool:
        """Offer a candidate; True if it is in the population afterwards."""
        if not self.eligible(c) or any(m.id == c.id for m in self._members):
            return any(m.id == c.id for m in self._members)
        self._members.append(c)
        self._members.sort(key=rank_key)
        del self._members[self.capacity:]
        return any(m.id == c.id for m in self._members)

    def extend(self, cs: Iterable[Candidate]) -> None:
        """Offer each candidate in turn."""
        for c in cs:
            self.add(c)

    def members(self) -> list[Candidate]:
        """The population, best first."""
        return list(self._members)

    def ids(self) -> set[str]:
        """The ids of the population."""
        return {m.id for m in self._members}

    def best(self) -> Candidate | None:
        """The best member, or None while the island is empty."""
        return self._members[0] if self._members else None

    def median_fitness(self) -> float | None:
        """The median fitness of the population, or None while it is empty."""
        fs = [m.fitness for m in self._members if m.fitness is not None]
        return statistics.median(fs) if fs else None

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, candidate_id: object) -> bool:
        return any(m.id == candidate_id for m in self._members)

    def __repr__(self) -> str:
        best = self.best()
        return f"Island({self.index}, {len(self)}/{self.capacity}, best={best.fitness if best else None})"


def make_islands(n: int, capacity: int) -> list[Island]:
    """`n` empty islands of `capacity` each; raises IslandError when `n` is below 1."""
    if n < 1:
        raise IslandError(f"a search needs at least one island, got {n}")
    return [Island(i, capacity) for i in range(n)]


def _point(value: Directives | Mapping[str, Any] | str | None) -> Directives | None:
    if value is None or isinstance(value, Directives):
        return value
    return Directives.from_label(value) if isinstance(value, str) else Directives.from_dict(value)


@attrs.frozen
class IslandSpec:
    """What sets one island apart (e.g. an LSA island and a GIN island); unset fields follow the run.

    backend: the only backend its proposals may use; seed_point: the design point it starts from (default the
    conservative point of its space); prompt: a note added to its LLM prompts."""

    backend: str | None = None
    seed_point: Directives | None = attrs.field(default=None, converter=_point)
    prompt: str = ""

    def space(self, space: DesignSpace) -> DesignSpace:
        """The part of `space` this island searches."""
        return space if self.backend is None else space.restrict(backends=(self.backend,))

    def check(self, index: int, space: DesignSpace) -> None:
        """Raise IslandError if this island cannot search `space`."""
        if self.backend is not None and self.backend not in space.backends:
            raise IslandError(f"island {index}: backend {self.backend!r} is not in the design space "
                              f"({', '.join(space.backends)})")
        own = self.space(space)
        if next(own.points(), None) is None:
            raise IslandError(f"island {index}: backend {self.backend!r} has no legal point in this design space "
                              "(is its transport available on this topology?)")
        if self.seed_point is not None and not own.is_legal(self.seed_point):
            raise IslandError(f"island {index}: seed point {self.seed_point.label()} is not legal there: "
                              f"{own.check(self.seed_point)}")

    def start_point(self, space: DesignSpace) -> Directives:
        """The point this island starts from: its seed point, else the conservative point of its space."""
        return self.seed_point or self.space(space).conservative()

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict."""
        return {"backend": self.backend, "seed_point": self.seed_point.to_dict() if self.seed_point else None,
                "prompt": self.prompt}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "IslandSpec":
        """The spec stored by `to_dict`."""
        return cls(d.get("backend"), d.get("seed_point"), str(d.get("prompt", "")))
