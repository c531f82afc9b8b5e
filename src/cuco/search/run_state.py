"""What a run keeps besides its candidates, in the database's meta table: the identity of the run (workload,
space, config, evaluator kind), checked on every open, and the loop's progress (generation, history,
migration log, meta-summary), saved after every generation."""

from __future__ import annotations

from typing import Any

import attrs

from cuco.design_space import DesignSpace
from cuco.errors import CucoError
from cuco.search.config import SearchConfig
from cuco.search.meta import MetaSummary

PREFIX = "search:"


LLM_CHILD_OPS = ("llm_diff", "llm_full", "llm_cross")
LLM_FAILED_OPS = ("llm_failed_fallback", "llm_config_fallback")


class RunMismatchError(CucoError):
    """The run directory (database) belongs to another workload, space, config or evaluator."""


@attrs.frozen
class GenerationStats:
    """One generation (one evaluated batch)."""

    generation: int
    evaluated: int
    phase: str
    best_fitness: float | None
    batch_best: float | None
    ops: dict = attrs.field(factory=dict)
    failed: int = 0


@attrs.frozen
class RunState:
    """The loop's progress: generation, evaluations, per-generation history, migrations, meta-summary and LLM state."""

    generation: int = 0
    total: int = 0
    history: tuple[GenerationStats, ...] = ()
    migrations: tuple[tuple[int, list], ...] = ()
    summary: MetaSummary = attrs.field(factory=MetaSummary)
    llm_disabled: bool = False
    llm_note: str = ""  # why the LLM was switched off, else the last reason an LLM proposal failed
    exhausted: bool = False  # the offline search stopped short of `total`: every legal point was evaluated

    def to_dict(self) -> dict[str, Any]:
        """The state as a JSON-ready dict."""
        return {"generation": self.generation, "total": self.total,
                "history": [attrs.asdict(h) for h in self.history],
                "migrations": [[g, moves] for g, moves in self.migrations],
                "summary": self.summary.to_dict(), "llm_disabled": self.llm_disabled, "llm_note": self.llm_note,
                "exhausted": self.exhausted}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunState":
        """The state stored by `to_dict` (missing fields take their defaults)."""
        return cls(int(d.get("generation", 0)), int(d.get("total", 0)),
                   tuple(GenerationStats(**h) for h in d.get("history", ())),
                   tuple((int(g), list(m)) for g, m in d.get("migrations", ())),
                   MetaSummary.from_dict(d.get("summary", {})), bool(d.get("llm_disabled", False)),
                   str(d.get("llm_note", "")), bool(d.get("exhausted", False)))

    def llm_counts(self) -> tuple[int, int]:
        """(usable LLM children, LLM proposals that failed and fell back to the directive mutator)."""
        ops = [op for h in self.history for op in h.ops.items()]
        usable = sum(n for op, n in ops if op in LLM_CHILD_OPS)
        return usable, sum(n for op, n in ops if op in LLM_FAILED_OPS)

    def llm_notes(self) -> tuple[str, ...]:
        """Plain sentences about the LLM's part in the run: nothing usable, switched off, budget reached."""
        usable, failed = self.llm_counts()
        notes = []
        if any(h.ops.get("llm_config_fallback") for h in self.history):
            notes.append(f"LLM mutations were switched off during the run: {self.llm_note or 'configuration error'}")
        elif failed and not usable:
            notes.append(f"the LLM returned nothing usable in {failed} proposal(s); each fell back to the directive "
                         f"mutator" + (f" (last reason: {self.llm_note})" if self.llm_note else ""))
        if any(h.ops.get("budget_fallback") for h in self.history):
            notes.append("the LLM budget cap was reached; the rest of the run used the directive mutator")
        return tuple(notes)

    def exhausted_note(self, evaluated: int) -> str:
        """The sentence that says the search ran out of points after `evaluated` of the `total` asked."""
        return (f"every legal point of the design space was evaluated: the search stopped after {evaluated} of the "
                f"{self.total} evaluations asked (without an LLM nothing new is left to try)")

    @classmethod
    def load(cls, db: Any) -> "RunState":
        """The state saved in `db`, or a fresh one when none is saved."""
        data = db.meta_get(PREFIX + "state")
        return cls.from_dict(data) if data else cls()

    def save(self, db: Any) -> None:
        """Store the state in `db`'s meta table."""
        db.meta_set(PREFIX + "state", self.to_dict())


def write_run_meta(db: Any, workload: str, space: DesignSpace, config: SearchConfig, evaluator_kind: str) -> None:
    """Record the run's identity on first use; on later opens, refuse anything that differs."""
    mine = {"workload": workload, "space": space.to_dict(), "config": config.to_dict(), "evaluator_kind": evaluator_kind}
    stored = {k: db.meta_get(PREFIX + k) for k in mine}
    if stored["workload"] is not None and stored["workload"] != workload:
        raise RunMismatchError(f"{getattr(db, 'path', 'this database')} holds a run of workload {stored['workload']!r}, "
                               f"not {workload!r}; resume it with that workload or use a new run directory")
    for key, what in (("space", "design space"), ("config", "search config"), ("evaluator_kind", "evaluator kind")):
        if stored[key] is not None and stored[key] != _plain(mine[key]):
            raise RunMismatchError(
                f"{getattr(db, 'path', 'this database')} was started with another {what} "
                f"({_diff(stored[key], _plain(mine[key]))}); resume it with the stored settings "
                "(cuco.search.api.resume) or use a new run directory")
    for key, value in mine.items():
        if stored[key] is None:
            db.meta_set(PREFIX + key, value)


def stored_identity(db: Any) -> dict[str, Any]:
    """The identity stored by write_run_meta (values None where the run has none)."""
    return {k: db.meta_get(PREFIX + k) for k in ("workload", "space", "config", "evaluator_kind")}


def _plain(value: Any) -> Any:
    """The value as it reads back from JSON (tuples become lists)."""
    import json  # noqa: PLC0415
    return json.loads(json.dumps(value, sort_keys=True))


def _diff(a: Any, b: Any) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return ", ".join(f"{k}: stored {a.get(k)!r} vs given {b.get(k)!r}" for k in keys[:3])
    return f"stored {a!r} vs given {b!r}"
