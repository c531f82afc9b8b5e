"""Candidates as a pandas DataFrame (`CandidateDB.to_pandas`): one row per candidate, for notebooks and plots.
pandas is optional: only this view needs it (`pip install pandas`, or the `pandas` extra)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Iterable

from cuco.candidate import LEVELS, Candidate
from cuco.errors import CucoError

if TYPE_CHECKING:
    import pandas

#: The columns every frame has, in order; then the directives, the metrics and each level's seconds.
COLUMNS = ("id", "parent_id", "workload", "island", "generation", "mutation", "status", "fitness", "point",
           "llm_cost_usd", "created_at")


def _row(c: Candidate, code: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": c.id, "parent_id": c.parent_id, "workload": c.workload, "island": c.island,
        "generation": c.generation, "mutation": c.mutation, "status": c.status, "fitness": c.fitness,
        "point": c.directives.label() if c.directives else None, "llm_cost_usd": c.llm_cost_usd,
        "created_at": datetime.datetime.fromtimestamp(c.created_at, datetime.timezone.utc),
    }
    row.update(c.directives.to_dict() if c.directives else {})
    row.update(c.metrics)
    row.update({f"{level}_s": c.results[level].seconds for level in LEVELS if level in c.results})
    if code:
        row["code"] = c.code
    return row


def candidates_frame(candidates: Iterable[Candidate], *, code: bool = False) -> "pandas.DataFrame":
    """One row per candidate: COLUMNS, then its directives (one column each), its metrics (time_ms, speedup, ...)
    and the seconds of each level it ran (static_s, compile_s, verify_s, bench_s); `code=True` adds its source.
    A column a candidate lacks holds NaN or None."""
    try:
        import pandas as pd
    except ImportError:
        raise CucoError("CandidateDB.to_pandas() needs pandas, which cuco does not install by itself: "
                        "pip install pandas (or pip install 'cuco[pandas]')") from None
    rows = [_row(c, code) for c in candidates]
    extra = list(dict.fromkeys(k for row in rows for k in row if k not in COLUMNS))
    return pd.DataFrame(rows, columns=[*COLUMNS, *extra])
