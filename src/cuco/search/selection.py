"""Parent selection within an island: weighted (sigmoid around the median, fewer children preferred),
power-law over rank, or beam (the top few)."""

from __future__ import annotations

import math
import random
import statistics
from typing import Callable, Sequence, Union

import attrs

from cuco.candidate import Candidate
from cuco.errors import CucoError
from cuco.search.island import rank_key

ChildrenOf = Callable[[str], int]


class SelectionError(CucoError, ValueError):
    """Parent selection was asked to pick from nothing, or configured with impossible values."""


def _no_children(_id: str) -> int:
    return 0


def _best_first(members: Sequence[Candidate]) -> list[int]:
    """Indices of `members`, the best first."""
    return sorted(range(len(members)), key=lambda i: rank_key(members[i]))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@attrs.frozen
class Weighted:
    """w = sigmoid(sharpness * (f - median) / spread) / (1 + children): better than the median is preferred,
    parents that already have many children are tried less."""

    sharpness: float = attrs.field(default=4.0, validator=attrs.validators.gt(0))
    name: str = "weighted"

    def weights(self, members: Sequence[Candidate], children: ChildrenOf = _no_children) -> list[float]:
        """The unnormalised selection weight of each member (see the class docstring)."""
        fs = [float(m.fitness) for m in members]  # type: ignore[arg-type]
        med = statistics.median(fs)
        spread = statistics.median([abs(f - med) for f in fs]) or (statistics.pstdev(fs) if len(fs) > 1 else 0.0)
        spread = spread or max(abs(med), 1e-12)
        return [_sigmoid(self.sharpness * (f - med) / spread) / (1 + children(m.id)) for f, m in zip(fs, members)]


@attrs.frozen
class PowerLaw:
    """w = rank ** -alpha, rank 1 the best (the FunSearch/AlphaEvolve style of pressure)."""

    alpha: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    name: str = "power_law"

    def weights(self, members: Sequence[Candidate], children: ChildrenOf = _no_children) -> list[float]:
        """The unnormalised selection weight of each member (see the class docstring)."""
        order, w = _best_first(members), [0.0] * len(members)
        for rank, i in enumerate(order, 1):
            w[i] = rank ** -self.alpha
        return w


@attrs.frozen
class Beam:
    """Only the `width` best can be parents; among them, those with fewer children first."""

    width: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    name: str = "beam"

    def weights(self, members: Sequence[Candidate], children: ChildrenOf = _no_children) -> list[float]:
        """The unnormalised selection weight of each member: 0 outside the `width` best."""
        order, w = _best_first(members), [0.0] * len(members)
        for i in order[: self.width]:
            w[i] = 1.0 / (1 + children(members[i].id))
        return w


Policy = Union[Weighted, PowerLaw, Beam]
POLICIES = {"weighted": Weighted, "power_law": PowerLaw, "beam": Beam}


def probabilities(policy: Policy, members: Sequence[Candidate], children: ChildrenOf = _no_children) -> list[float]:
    """Selection probability of each member (sums to 1)."""
    if not members:
        raise SelectionError("cannot select a parent from an empty population; seed the island first")
    if any(m.fitness is None for m in members):
        raise SelectionError("every selectable candidate needs a fitness; evaluate it first")
    w = policy.weights(members, children)
    total = sum(w)
    if not total > 0 or not math.isfinite(total):
        return [1.0 / len(members)] * len(members)
    return [x / total for x in w]


def select(policy: Policy, members: Sequence[Candidate], rng: random.Random,
           children: ChildrenOf = _no_children) -> Candidate:
    """One parent drawn with `rng`."""
    p = probabilities(policy, members, children)
    return rng.choices(list(members), p)[0]


def policy_from_dict(d: dict) -> Policy:
    """The policy a stored dict names (default weighted) with its fields; raises SelectionError for an unknown name."""
    d = dict(d)
    name = d.pop("name", "weighted")
    if name not in POLICIES:
        raise SelectionError(f"unknown selection policy {name!r}; use one of {', '.join(POLICIES)}")
    return POLICIES[name](**d)
