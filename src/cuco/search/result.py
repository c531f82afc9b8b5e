"""A search run's outcome (SearchResult), read from its database: best, history, counts, spend and notes."""

from __future__ import annotations

from typing import Any

import attrs

from cuco.candidate import Candidate
from cuco.spend import LEDGER_FILE, SpendLedger
from cuco.search.run_state import GenerationStats, RunState


@attrs.frozen
class SearchResult:
    """A run's outcome: its best candidate, per-generation history, counts by status, evaluations, LLM spend,
    the evaluator's kind ("modelled" where no GPU measured anything), notes on how the run went, and whether it
    stopped short of the `asked` evaluations because every legal point was evaluated (offline only)."""

    best: Candidate | None
    history: tuple[GenerationStats, ...]
    counts: dict
    evaluated: int
    llm_cost_usd: float
    evaluator_kind: str
    notes: tuple[str, ...] = ()  # plain sentences about how the run went (e.g. an LLM that never helped)
    exhausted: bool = False
    asked: int = 0


def read_result(db: Any, workload: str, evaluator_kind: str) -> SearchResult:
    """The outcome of `workload`'s run stored in `db` (a CandidateDB), as it stands."""
    ledger = SpendLedger(db.path.parent / LEDGER_FILE)
    # the run's ledger counts every call (failed replies, retries, resamples, summaries, calls cut by a
    # kill); the candidates' own costs only the replies that became candidates
    cost = ledger.total_usd() if ledger.path.exists() else sum(c.llm_cost_usd for c in db.all(workload))
    state = RunState.load(db)
    counts = db.count_by_status(workload)
    evaluated = sum(n for s, n in counts.items() if s != "pending")
    notes = state.llm_notes() + ((state.exhausted_note(evaluated),) if state.exhausted else ())
    return SearchResult(db.best(workload), tuple(state.history), counts, evaluated, cost, evaluator_kind, notes,
                        state.exhausted, state.total)
