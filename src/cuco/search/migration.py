"""Migration between islands on a ring: every `interval` generations island i sends copies of some members to i+1."""

from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

import attrs

from cuco.candidate import Candidate
from cuco.search.island import Island


@attrs.frozen
class Move:
    """One migrant: a copy of candidate `candidate_id` goes from island `src` to island `dst`."""

    src: int
    dst: int
    candidate_id: str

    def to_list(self) -> list:
        """The move as [src, dst, candidate_id], its form in the migration log."""
        return [self.src, self.dst, self.candidate_id]


@attrs.frozen
class MigrationPolicy:
    """interval: generations between migrations (0 = never); rate: fraction of the source population sent (at
    least one); elitist: send the source's best members (else a random sample)."""

    interval: int = attrs.field(default=4, validator=attrs.validators.ge(0))
    rate: float = attrs.field(default=0.25, validator=[attrs.validators.gt(0), attrs.validators.le(1)])
    elitist: bool = True

    def due(self, generation: int) -> bool:
        """True when islands exchange migrants after `generation`."""
        return self.interval > 0 and generation > 0 and generation % self.interval == 0

    def plan(self, islands: Sequence[Island], rng: random.Random) -> list[Move]:
        """The moves of one migration on the ring (nothing with a single island)."""
        if len(islands) < 2:
            return []
        moves = []
        for src in islands:
            dst = islands[(src.index + 1) % len(islands)]
            pop = src.members()
            if not pop:
                continue
            k = max(1, math.floor(self.rate * len(pop)))
            chosen = pop[:k] if self.elitist else rng.sample(pop, k)
            moves.extend(Move(src.index, dst.index, c.id) for c in chosen if c.id not in dst)
        return moves


def apply(islands: Sequence[Island], moves: Sequence[Move], candidates: Mapping[str, Candidate] | None = None) -> None:
    """Copy each migrant into its destination (the source keeps it). Moves are planned first, applied after,
    so a candidate does not travel twice around the ring in one migration. `candidates` (id -> Candidate)
    resolves ids that are no longer in any population, as when a resumed run replays its migration log."""
    by_id = dict(candidates or {})
    by_id.update({c.id: c for isl in islands for c in isl.members()})
    for m in moves:
        c = by_id.get(m.candidate_id)
        if c is not None:
            islands[m.dst].add(c)
