"""MAP-Elites archive: a grid over chosen directives holding one elite per cell, plus top-k inspirations."""

from __future__ import annotations

import random
from typing import Sequence

from cuco.candidate import Candidate
from cuco.design_space import DIRECTIVE_NAMES, DesignSpace, format_bytes
from cuco.errors import CucoError
from cuco.search.island import Island, rank_key

UNKNOWN = "?"


class ArchiveError(CucoError, ValueError):
    """The archive was configured with directives that do not exist."""


class Archive:
    """Elites by cell: the cell of a candidate is its value on each of `axes` (default placement x sync_scope)."""

    def __init__(self, axes: Sequence[str] = ("placement", "sync_scope"), top_k: int = 5):
        bad = [a for a in axes if a not in DIRECTIVE_NAMES]
        if bad or not axes:
            raise ArchiveError(f"archive axes {list(axes)} must be directive names from {', '.join(DIRECTIVE_NAMES)}")
        if top_k < 0:
            raise ArchiveError(f"archive top_k must be >= 0, got {top_k}")
        self.axes = tuple(axes)
        self.top_k = top_k
        self._cells: dict[tuple[str, ...], Candidate] = {}
        self._top: list[Candidate] = []

    def cell(self, c: Candidate) -> tuple[str, ...]:
        """The candidate's cell: its value on each axis ('?' on every axis when it has no directives)."""
        if c.directives is None:
            return tuple(UNKNOWN for _ in self.axes)
        out = []
        for a in self.axes:
            v = getattr(c.directives, a)
            out.append(format_bytes(v) if a == "chunk_bytes" else str(v))
        return tuple(out)

    def add(self, c: Candidate) -> bool:
        """Offer a candidate; True if it became the elite of its cell."""
        if not Island.eligible(c):
            return False
        if all(t.id != c.id for t in self._top):
            self._top = sorted([*self._top, c], key=rank_key)[: self.top_k]
        key = self.cell(c)
        held = self._cells.get(key)
        if held is None or rank_key(c) < rank_key(held):
            self._cells[key] = c
            return True
        return False

    def elites(self) -> dict[tuple[str, ...], Candidate]:
        """The elite of each cell so far."""
        return dict(self._cells)

    def top(self) -> list[Candidate]:
        """The top_k best candidates seen, best first."""
        return list(self._top)

    def coverage(self, space: DesignSpace) -> float:
        """Filled cells over the cells the space can reach."""
        reachable = {tuple(format_bytes(getattr(p, a)) if a == "chunk_bytes" else str(getattr(p, a))
                           for a in self.axes) for p in space.points()}
        return len(set(self._cells) & reachable) / max(1, len(reachable))

    def inspirations(self, k: int, rng: random.Random, exclude: Sequence[str] = ()) -> list[Candidate]:
        """Up to k candidates: about half from the top, the rest elites of other cells (for diversity)."""
        skip = set(exclude)
        top = [c for c in self._top if c.id not in skip]
        chosen = top[: (k + 1) // 2]
        taken = skip | {c.id for c in chosen}
        others = sorted((c for c in self._cells.values() if c.id not in taken), key=rank_key)
        rng.shuffle(others)
        chosen += others[: k - len(chosen)]
        if len(chosen) < k:
            chosen += [c for c in top if c.id not in {x.id for x in chosen}][: k - len(chosen)]
        return chosen[:k]

    def __len__(self) -> int:
        return len(self._cells)
