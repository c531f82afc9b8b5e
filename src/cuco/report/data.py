"""What a run report shows, read from a run directory without locking it (a run may still be writing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from cuco.candidate import RANKED_STATUSES, Candidate
from cuco.errors import CucoError

#: Trace files (Chrome/Perfetto JSON) a traced run leaves beside the report.
TIMELINE_DIR = "timeline"

#: A run's state, as the report says it.
STATES = {
    "ended": "ended",
    "running": "in progress (a process holds the run's lock)",
    "stopped": "stopped before it ended (cuco run --resume finishes it)",
    "api": "not running (started through the Python API, which writes no summary.json)",
    "unknown": "no summary.json: still running, or stopped before it ended",
}


class ReportError(CucoError):
    """The run directory cannot be reported on; the message names what is missing and the fix."""


@attrs.frozen
class RunData:
    """Everything the report draws: candidates in evaluation order, the run's identity and progress, spend, files."""

    run_dir: Path
    candidates: tuple[Candidate, ...]
    manifest: dict[str, Any]
    summary: dict[str, Any]
    identity: dict[str, Any]
    history: tuple[dict[str, Any], ...]   # one entry per evaluated batch (phase, ops, best fitness)
    spend: tuple[dict[str, Any], ...]     # llm_spend.jsonl records
    timelines: tuple[Path, ...]
    missing: tuple[str, ...]              # what a partial report lacks, in words
    state: str = "ended"                  # one of STATES: whether the run is still writing

    @property
    def workload(self) -> str:
        """The workload's name ('?' when the run records none)."""
        return str(self.identity.get("workload") or self.manifest.get("workload") or "?")

    def by_id(self) -> dict[str, Candidate]:
        """The candidates by id."""
        return {c.id: c for c in self.candidates}

    def phases(self) -> list[str]:
        """The schedule phase (explore/exploit) of each candidate, by the batches the loop recorded."""
        out: list[str] = []
        for h in self.history:
            out += [str(h.get("phase", "?"))] * int(h.get("evaluated", 0))
        out += ["?"] * (len(self.candidates) - len(out))
        return out[:len(self.candidates)]

    def best(self) -> Candidate | None:
        """The fittest verified candidate; in a run that measured nothing, the fittest by its (modelled) fitness."""
        from cuco.report.charts import finite  # noqa: PLC0415

        for statuses in (("passed",), RANKED_STATUSES):  # a NaN, infinite or text fitness ranks nothing
            ranked = [c for c in self.candidates if c.status in statuses and finite(c.fitness) is not None]
            if ranked:
                return max(ranked, key=lambda c: finite(c.fitness))  # type: ignore[arg-type, return-value]
        return None

    def fastpath(self) -> Candidate | None:
        """The fast path's candidate, or None when the run has none."""
        return next((c for c in self.candidates if c.mutation == "fastpath"), None)


def _json_file(path: Path) -> tuple[dict[str, Any], str]:
    """The file's JSON object and '' ; or {} and 'absent' / 'unreadable'."""
    if not path.is_file():
        return {}, "absent"
    try:
        data = json.loads(path.read_text())
        return (data, "") if isinstance(data, dict) else ({}, "unreadable")
    except (OSError, json.JSONDecodeError):
        return {}, "unreadable"


def _state(run_dir: Path, manifest: str, summary: str, api_run: bool) -> str:
    """One of STATES: a `cuco run` writes manifest.json first and summary.json last, and a search holds the
    run's lock while it writes."""
    from cuco import runlock  # noqa: PLC0415

    if summary != "absent":
        return "ended"
    held = runlock.is_held(run_dir)
    if held:
        return "running"
    if held is None:
        return "unknown"
    return "api" if manifest == "absent" and api_run else "stopped"


def _spend(path: Path) -> tuple[dict[str, Any], ...]:
    if not path.is_file():
        return ()
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being appended right now
        if isinstance(rec, dict):
            records.append(rec)
    return tuple(records)


def load_run(run_dir: str | Path) -> RunData:
    """Read a run directory (read-only). ReportError when it is not one; a partial RunData (with `missing`)
    when the run is empty or still starting."""
    from cuco.db import CandidateDB, DatabaseError  # noqa: PLC0415
    from cuco.search.run_state import RunState, stored_identity  # noqa: PLC0415
    from cuco.spend import LEDGER_FILE  # noqa: PLC0415

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a directory: pass the run directory that `cuco run` printed")
    db_path = run_dir / "candidates.db"
    if not db_path.is_file():
        raise ReportError(f"{run_dir} has no candidates.db, so it holds no run: pass the directory `cuco run "
                          "--run-dir` wrote (it contains candidates.db and manifest.json)")
    missing: list[str] = []
    try:
        db = CandidateDB(db_path, readonly=True)
    except DatabaseError as exc:
        raise ReportError(f"cannot read the run's database: {exc}") from None
    try:
        candidates = tuple(sorted(db.all(), key=lambda c: c.created_at))
        identity = stored_identity(db)
        state = RunState.load(db)
    except DatabaseError as exc:
        raise ReportError(f"cannot read the run's database: {exc}") from None
    finally:
        db.close()
    if not candidates:
        missing.append("candidates (the run has evaluated nothing yet)")
    manifest, manifest_problem = _json_file(run_dir / "manifest.json")
    summary, summary_problem = _json_file(run_dir / "summary.json")
    progress = _state(run_dir, manifest_problem, summary_problem, identity.get("workload") is not None)
    if manifest_problem == "unreadable" or (manifest_problem and progress != "api"):
        missing.append(f"manifest.json{' is unreadable or half-written' if manifest_problem == 'unreadable' else ''} "
                       "(the run's identity)")
    if summary_problem == "unreadable" or (summary_problem and progress in ("stopped", "unknown")):
        missing.append(f"summary.json{' is unreadable or half-written' if summary_problem == 'unreadable' else ''} "
                       "(written when the run ends)")
    timelines = tuple(sorted((run_dir / TIMELINE_DIR).glob("*.json"))) if (run_dir / TIMELINE_DIR).is_dir() else ()
    history = tuple(attrs.asdict(h) for h in state.history)
    return RunData(run_dir, candidates, manifest, summary, identity, history, _spend(run_dir / LEDGER_FILE),
                   timelines, tuple(missing), progress)
