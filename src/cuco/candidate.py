"""Candidate: one program of the search, with its directives, lineage and per-level results."""

from __future__ import annotations

import time
import uuid
from typing import Any, Mapping

import attrs

from cuco.design_space import Directives

#: Cascade levels in order; a candidate's results are keyed by these names.
LEVELS = ("static", "compile", "verify", "bench")

#: LevelResult.data flag of a level that could not run on this machine (no GPU group for the world size, or the
#: modelled evaluator's stand-ins): such a candidate is 'unmeasured', neither passed nor failed.
NOT_RUN_HERE = "not_run_here"
#: Statuses whose candidates are ranked by fitness ('unmeasured' ones have one only from a model).
RANKED_STATUSES = ("passed", "unmeasured")

#: How a candidate came to be.
#: 'original': the program a run is measured against (a user's program, a workload's host seed), the run's best
#: when no verified rewrite beat it (cuco.reference_best).
MUTATIONS = ("seed", "fastpath", "directive", "directive_cross", "llm_diff", "llm_full", "llm_cross", "manual",
             "original")


def new_id() -> str:
    """A fresh random candidate id (32 hex digits)."""
    return uuid.uuid4().hex


@attrs.frozen
class LevelResult:
    """The outcome of one cascade level for one candidate."""

    level: str = attrs.field(validator=attrs.validators.in_(LEVELS))
    passed: bool
    reason: str = ""
    seconds: float = 0.0
    data: Mapping[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {"level": self.level, "passed": self.passed, "reason": self.reason,
                "seconds": self.seconds, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LevelResult":
        """The result stored by `to_dict`."""
        return cls(d["level"], bool(d["passed"]), d.get("reason", ""), float(d.get("seconds", 0.0)),
                   dict(d.get("data", {})))


@attrs.frozen
class Candidate:
    """A program and everything known about it. Immutable: use `with_result` / `evolve` to update."""

    code: str
    workload: str
    directives: Directives | None = None
    id: str = attrs.field(factory=new_id)
    parent_id: str | None = None
    inspiration_ids: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    island: int = 0
    generation: int = 0
    mutation: str = attrs.field(default="seed", validator=attrs.validators.in_(MUTATIONS))
    results: Mapping[str, LevelResult] = attrs.field(factory=dict)
    metrics: Mapping[str, float] = attrs.field(factory=dict)
    fitness: float | None = None
    feedback: str = ""
    llm_cost_usd: float = 0.0
    created_at: float = attrs.field(factory=time.time)

    # -- derived -----------------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """'pending', 'passed' (every level ran here and passed, bench included), 'unmeasured' (no level failed
        but at least one could not run here: see NOT_RUN_HERE) or 'failed:<level>'."""
        unmeasured = False
        for level in LEVELS:
            r = self.results.get(level)
            if r is None:
                return "pending"
            if r.data.get(NOT_RUN_HERE):
                unmeasured = True
            elif not r.passed:
                return f"failed:{level}"
        return "unmeasured" if unmeasured else "passed"

    @property
    def ranked(self) -> bool:
        """Has a fitness to be ranked by: passed, or unmeasured with a modelled fitness."""
        return self.status in RANKED_STATUSES and self.fitness is not None

    @property
    def failed(self) -> bool:
        """True when a cascade level rejected the candidate (status 'failed:<level>')."""
        return self.status.startswith("failed")

    @property
    def last_level(self) -> str | None:
        """The last cascade level with a result, or None before any level ran."""
        done = [lv for lv in LEVELS if lv in self.results]
        return done[-1] if done else None

    # -- updates -----------------------------------------------------------------------------------
    def with_result(self, result: LevelResult) -> "Candidate":
        """A copy with `result` recorded under its level, replacing an earlier result of that level."""
        results = dict(self.results)
        results[result.level] = result
        return attrs.evolve(self, results=results)

    def evolve(self, **changes: Any) -> "Candidate":
        """A copy with the given fields changed."""
        return attrs.evolve(self, **changes)

    def child(self, code: str, directives: Directives | None, mutation: str, **changes: Any) -> "Candidate":
        """A new candidate descended from this one (fresh id, no results)."""
        fields: dict[str, Any] = {"island": self.island, "generation": self.generation + 1}
        fields.update(changes)
        return Candidate(code=code, workload=self.workload, directives=directives, parent_id=self.id,
                         mutation=mutation, **fields)

    # -- serialisation -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The candidate as a JSON-ready dict."""
        return {
            "id": self.id, "code": self.code, "workload": self.workload,
            "directives": self.directives.to_dict() if self.directives else None,
            "parent_id": self.parent_id, "inspiration_ids": list(self.inspiration_ids),
            "island": self.island, "generation": self.generation, "mutation": self.mutation,
            "results": {k: v.to_dict() for k, v in self.results.items()},
            "metrics": dict(self.metrics), "fitness": self.fitness, "feedback": self.feedback,
            "llm_cost_usd": self.llm_cost_usd, "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Candidate":
        """The candidate stored by `to_dict`. A metric that is not a number (a user's evaluator wrote text) is kept
        as stored: one odd value must not make the whole run unreadable."""
        return cls(
            code=d["code"], workload=d["workload"],
            directives=Directives.from_dict(d["directives"]) if d.get("directives") else None,
            id=d["id"], parent_id=d.get("parent_id"), inspiration_ids=tuple(d.get("inspiration_ids", ())),
            island=int(d.get("island", 0)), generation=int(d.get("generation", 0)),
            mutation=d.get("mutation", "seed"),
            results={k: LevelResult.from_dict(v) for k, v in d.get("results", {}).items()},
            metrics={k: _number_or_as_is(v) for k, v in d.get("metrics", {}).items()},
            fitness=d.get("fitness"), feedback=d.get("feedback", ""),
            llm_cost_usd=float(d.get("llm_cost_usd", 0.0)), created_at=float(d.get("created_at", 0.0)),
        )


def _number_or_as_is(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return value
