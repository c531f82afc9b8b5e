"""A small set of points that uses every value of every directive at least once (what CI compiles)."""

from __future__ import annotations

from cuco.design_space import DesignSpace, Directives


def covering_points(space: DesignSpace) -> list[Directives]:
    """Legal points, greedily chosen so that every (directive, value) that some legal point uses appears in one;
    extra directives included. Deterministic: the same space gives the same list."""
    legal = list(space.points())
    pairs = lambda p: {(n, p.get(n)) for n in space.names}  # noqa: E731
    wanted = set().union(*(pairs(p) for p in legal)) if legal else set()
    chosen: list[Directives] = []
    covered: set = set()
    while covered != wanted:
        best = max(legal, key=lambda p: len(pairs(p) - covered))
        chosen.append(best)
        covered |= pairs(best)
    return chosen
