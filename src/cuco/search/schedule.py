"""The two-phase schedule: explore first, then exploit; which operator and temperature each proposal uses."""

from __future__ import annotations

import random
from typing import Any, Mapping

import attrs

from cuco.errors import CucoError

LLM_OPS = ("llm_diff", "llm_full", "llm_cross")
DIRECTIVE_OPS = ("directive_sample", "directive_far", "directive_near", "directive_cross")
OPS = LLM_OPS + DIRECTIVE_OPS


class ScheduleError(CucoError, ValueError):
    """A schedule names an unknown operator, a negative weight, or an impossible split."""


def _mix(value: Mapping[str, float]) -> dict[str, float]:
    mix = {str(k): float(v) for k, v in dict(value).items() if float(v) != 0}
    bad = [k for k in mix if k not in OPS]
    if bad:
        raise ScheduleError(f"unknown operator(s) {bad} in a schedule mix; use {', '.join(OPS)}")
    if any(v < 0 for v in mix.values()) or not mix:
        raise ScheduleError(f"a mix needs non-negative weights and at least one operator, got {dict(value)}")
    return mix


@attrs.frozen
class Phase:
    """One phase: operator weights (LLM and offline) and the temperatures an LLM call draws from."""

    name: str
    llm_mix: Mapping[str, float] = attrs.field(converter=_mix)
    offline_mix: Mapping[str, float] = attrs.field(converter=_mix)
    temperatures: tuple[float, ...] = attrs.field(converter=tuple)

    def __attrs_post_init__(self) -> None:
        if any(k not in LLM_OPS for k in self.llm_mix):
            raise ScheduleError(f"phase {self.name}: llm_mix may hold only {', '.join(LLM_OPS)}")
        if any(k not in DIRECTIVE_OPS for k in self.offline_mix):
            raise ScheduleError(f"phase {self.name}: offline_mix may hold only {', '.join(DIRECTIVE_OPS)}")
        if not self.temperatures or any(t < 0 or t > 2 for t in self.temperatures):
            raise ScheduleError(f"phase {self.name}: temperatures must be a non-empty list within [0, 2]")


EXPLORE = Phase("explore", {"llm_diff": 15, "llm_full": 70, "llm_cross": 15},
                {"directive_sample": 50, "directive_far": 35, "directive_cross": 15}, (0.2, 0.5, 0.8))
EXPLOIT = Phase("exploit", {"llm_diff": 60, "llm_full": 25, "llm_cross": 15},
                {"directive_near": 85, "directive_cross": 15}, (0.0, 0.2, 0.5))


@attrs.frozen
class Step:
    """What one proposal does: its phase, its operator and (for LLM operators) its temperature."""

    phase: str
    op: str
    temperature: float


@attrs.frozen
class Schedule:
    """explore for the first `explore_fraction` of the evaluations, then exploit."""

    explore_fraction: float = attrs.field(default=0.4, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    explore: Phase = EXPLORE
    exploit: Phase = EXPLOIT

    def phase(self, index: int, total: int) -> Phase:
        """The phase of evaluation `index` (0-based) of `total`."""
        return self.explore if index < self.explore_fraction * max(total, 1) else self.exploit

    def step(self, index: int, total: int, rng: random.Random, llm: bool) -> Step:
        """Draw the operator (and temperature) of proposal `index`; offline operators when llm is False."""
        ph = self.phase(index, total)
        mix = ph.llm_mix if llm else ph.offline_mix
        ops, weights = zip(*sorted(mix.items()))
        op = rng.choices(ops, weights)[0]
        temperature = rng.choice(ph.temperatures) if llm else 0.0
        return Step(ph.name, op, temperature)

    def to_dict(self) -> dict[str, Any]:
        """The schedule as a JSON-ready dict."""
        def ph(p: Phase) -> dict[str, Any]:
            return {"name": p.name, "llm_mix": dict(p.llm_mix), "offline_mix": dict(p.offline_mix),
                    "temperatures": list(p.temperatures)}
        return {"explore_fraction": self.explore_fraction, "explore": ph(self.explore), "exploit": ph(self.exploit)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Schedule":
        """The schedule stored by `to_dict`."""
        return cls(float(d["explore_fraction"]), Phase(**d["explore"]), Phase(**d["exploit"]))
