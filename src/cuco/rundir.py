"""What a `cuco run` directory holds, found out without writing to it: nothing, a run (its manifest and
database), or something broken that must be named before any start or resume touches it."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from cuco.db import CandidateDB, DatabaseError
from cuco.errors import CucoError
from cuco.manifest import MANIFEST_FILE, RunManifest

DB_FILE = "candidates.db"


@attrs.frozen
class RunDirState:
    """A run directory as found: its manifest (None: none), whether its database exists, and how many of its
    candidates are evaluated."""

    path: Path
    manifest: RunManifest | None
    has_db: bool
    evaluated: int

    @property
    def holds_run(self) -> bool:
        """True when the directory holds a run (a manifest or a database)."""
        return self.manifest is not None or self.has_db


def _broken(db: Path, what: str) -> CucoError:
    return CucoError(f"{db} is {what}, not a cuco candidate database; nothing was written to it. Move it away "
                     f"or delete it (rm {db}), or choose another --run-dir")


def probe(run_dir: Path) -> RunDirState:
    """Read run_dir's manifest and database read-only; CucoError for a database that cannot be a run's."""
    run_dir = Path(run_dir)
    manifest = RunManifest.read(run_dir) if run_dir.is_dir() else None
    db = run_dir / DB_FILE
    if not db.exists():
        return RunDirState(run_dir, manifest, False, 0)
    if not db.is_file():
        raise _broken(db, "not a regular file")
    if os.path.getsize(db) == 0:
        if manifest is not None:  # our own start, killed between creating the file and its first write
            return RunDirState(run_dir, manifest, True, 0)
        raise _broken(db, "empty (0 bytes)")
    try:
        with CandidateDB(db, readonly=True) as cdb:
            counts = cdb.count_by_status()
    except DatabaseError as exc:
        if manifest is not None and "no such table" in str(exc):  # our start, killed before the tables
            return RunDirState(run_dir, manifest, True, 0)
        raise _broken(db, f"unreadable ({exc})") from None
    return RunDirState(run_dir, manifest, True, sum(n for s, n in counts.items() if s != "pending"))


def check_start(state: RunDirState, resume: bool) -> None:
    """Refuse a fresh start on a run, a resume of nothing, and a resume of a run cuco cannot identify."""
    if resume and not state.holds_run:
        raise CucoError(f"{state.path} holds no run to resume; drop --resume to start one there")
    if not resume and state.holds_run:
        raise CucoError(f"{state.path} already holds a run; pass --resume to continue it or choose another --run-dir")
    if resume and state.manifest is None:
        raise CucoError(f"{state.path} has a candidate database but no {MANIFEST_FILE}, so cuco cannot tell which "
                        "problem it measured (a run of an older cuco); start a new --run-dir")
