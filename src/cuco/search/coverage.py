"""What of the design space an offline search has left: the legal points of each island's space, enumerated once
where the space is small enough, so that a search without an LLM stops once it has evaluated every one of them."""

from __future__ import annotations

import math
from typing import AbstractSet, Sequence

import attrs

from cuco.design_space import DesignSpace

#: Value combinations enumerated at most per space (about half a second); a larger space never counts as exhausted.
MAX_COMBINATIONS = 100_000


def legal_labels(space: DesignSpace) -> frozenset[str] | None:
    """The labels of every legal point of `space`; None when it has more than MAX_COMBINATIONS combinations."""
    if math.prod(len(space.values(name)) for name in space.names) > MAX_COMBINATIONS:
        return None
    return frozenset(p.label() for p in space.points())


@attrs.frozen
class Coverage:
    """The legal labels of each island's space (None: too large to enumerate, never exhausted)."""

    islands: tuple[frozenset[str] | None, ...]

    @classmethod
    def of(cls, spaces: Sequence[DesignSpace]) -> "Coverage":
        """The coverage of the islands' spaces (islands sharing one space enumerate it once)."""
        known: dict[int, frozenset[str] | None] = {}
        for space in spaces:
            if id(space) not in known:
                known[id(space)] = legal_labels(space)
        return cls(tuple(known[id(space)] for space in spaces))

    def open(self, island: int, seen: AbstractSet[str]) -> bool:
        """True while island `island` has a legal point not in `seen`."""
        labels = self.islands[island]
        return labels is None or not labels <= seen

    def exhausted(self, seen: AbstractSet[str]) -> bool:
        """True when every legal point of every island's space is in `seen`."""
        return not any(self.open(i, seen) for i in range(len(self.islands)))

    def island_for(self, index: int, seen: AbstractSet[str]) -> int:
        """The island of proposal `index` (index mod islands), or, where that island has no unseen point left, the
        next island that has one (an island's own space holds its proposals: it could only repeat a point)."""
        n = len(self.islands)
        return next((j for j in ((index + k) % n for k in range(n)) if self.open(j, seen)), index % n)
