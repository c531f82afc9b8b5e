"""CandidateDB: every candidate of a run (failures included) in one SQLite file, safe to share and to resume.

Durability. The file is in WAL mode with ``synchronous=FULL``. A commit appends the transaction's pages and a
commit frame to the ``-wal`` file and returns only after they reach the OS, so a ``kill -9`` of the writer at any
instant leaves either the whole transaction (its commit frame is in the WAL) or none of it (the next opener's WAL
recovery ignores frames after the last valid commit frame): the file reopens with ``integrity_check == ok`` and
every committed candidate intact. ``NORMAL`` would already give that against a killed process, because the WAL
bytes sit in the OS page cache; ``FULL`` also fsyncs the WAL on every commit, so committed candidates survive a
power cut or kernel crash too. A candidate costs seconds to minutes of GPU time and commits are rare, so the one
fsync per commit is negligible next to what it protects.

Concurrency. Threads share one connection behind a lock; processes share the file through WAL. Every write is one
``BEGIN IMMEDIATE`` transaction (no read-to-write upgrade, hence no deadlock between writers), waits up to
``busy_timeout`` for the write lock and is retried while SQLite reports the database busy or locked.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

from cuco.candidate import Candidate
from cuco.db_errors import (DatabaseAccessError, DatabaseBusyError, DatabaseError,  # noqa: F401  (public here too)
                             DiskFullError, DuplicateCandidateError, NotACandidateDatabaseError,
                             SchemaVersionError, UnknownCandidateError)

if TYPE_CHECKING:
    import pandas

#: Version of the table layout written by this cuco (stored as PRAGMA user_version).
SCHEMA_VERSION = 1
#: PRAGMA application_id marking a cuco candidate database ("cuco" in ASCII).
APPLICATION_ID = 0x6375636F
#: SQL that lifts a database from version v to v + 1, applied in one transaction on open.
MIGRATIONS: dict[int, tuple[str, ...]] = {}

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS candidates (
        id TEXT PRIMARY KEY, workload TEXT NOT NULL, island INTEGER NOT NULL, generation INTEGER NOT NULL,
        parent_id TEXT, mutation TEXT NOT NULL, fitness REAL, status TEXT NOT NULL, created_at REAL NOT NULL,
        directives TEXT, data TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS candidates_rank ON candidates (workload, status, fitness)",
    "CREATE INDEX IF NOT EXISTS candidates_island ON candidates (island, status, fitness)",
    "CREATE INDEX IF NOT EXISTS candidates_parent ON candidates (parent_id)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_COLUMNS = "id, workload, island, generation, parent_id, mutation, fitness, status, created_at, directives, data"
_RANKED = "status IN ('passed', 'unmeasured') AND fitness IS NOT NULL"  # see Candidate.ranked
T = TypeVar("T")


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc) or "busy" in str(exc)


class CandidateDB:
    """All candidates of one or more runs, plus run metadata (`meta_get`/`meta_set`) for resume."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = 30.0, *, readonly: bool = False):
        """readonly: open an existing database for reading only (a report, a notebook, a check before a
        write): nothing in the file is created or changed, and writes raise DatabaseAccessError."""
        self.path = Path(path)
        self.readonly = readonly
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._inherited: list[sqlite3.Connection] = []  # connections of a parent process, never used or closed
        self._conn: sqlite3.Connection | None = self._open()

    # -- opening -------------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise DatabaseAccessError(f"candidate database path {self.path} is a directory; pass a file path")
        if self.readonly:
            if not self.path.is_file():
                raise DatabaseError(f"{self.path} does not exist; pass the path of a candidate database to read")
            target: str = f"{self.path.resolve().as_uri()}?mode=ro"
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseAccessError(
                    f"cannot create directory {self.path.parent} for the candidate database ({exc.strerror}); "
                    "choose a writable location") from None
            target = str(self.path)
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(target, uri=self.readonly, timeout=self._busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            # Read-only first, in one snapshot (another process may be creating the tables right now),
            # so that a file of a newer schema or another program stays untouched.
            self._retry(lambda: self._transaction(conn, False, self._check_header))
            if not self.readonly:
                self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
                conn.execute("PRAGMA synchronous = FULL")
                self._retry(lambda: self._transaction(conn, True, self._init_schema))
            return conn
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise self._translate(exc) from None
            raise

    def _check_header(self, conn: sqlite3.Connection) -> None:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
            raise NotACandidateDatabaseError(
                f"{self.path} is an SQLite database of another program (application_id={app_id:#x}, tables "
                f"{sorted(tables)}), not a cuco candidate database; pass a new path or a file cuco created")
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.path} has candidate-database schema version {version}, newer than version "
                f"{SCHEMA_VERSION} that this cuco reads; upgrade cuco (pip install -U cuco) to open it")

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        self._check_header(conn)  # again under the write lock: another process may have just created it
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            for stmt in _SCHEMA:
                conn.execute(stmt)
        else:
            for v in range(version, SCHEMA_VERSION):
                if v not in MIGRATIONS:
                    raise SchemaVersionError(
                        f"{self.path} has candidate-database schema version {version}, which this cuco (schema "
                        f"{SCHEMA_VERSION}) cannot migrate; open it with the cuco release that wrote it, or "
                        "start a new database")
                for stmt in MIGRATIONS[v]:
                    conn.execute(stmt)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- transactions --------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise DatabaseError(f"candidate database {self.path} is closed; open a new CandidateDB")
        if os.getpid() != self._pid:  # forked: SQLite connections must not cross fork(), open our own
            self._inherited.append(self._conn)
            self._pid, self._conn = os.getpid(), None
            self._conn = self._open()
        return self._conn

    @staticmethod
    def _transaction(conn: sqlite3.Connection, write: bool, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite already rolled back (e.g. after SQLITE_FULL)
            raise

    def _retry(self, attempt: Callable[[], T]) -> T:
        deadline, delay = time.monotonic() + self._busy_timeout_s, 0.005
        while True:
            try:
                return attempt()
            except sqlite3.Error as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)

    def _run(self, write: bool, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in one transaction (retried while busy); sqlite errors become DatabaseError."""
        if write and self.readonly:
            raise DatabaseAccessError(f"{self.path} was opened read-only; open CandidateDB(path) to write")
        try:
            with self._lock:
                conn = self._connection()
                return self._retry(lambda: self._transaction(conn, write, fn))
        except sqlite3.Error as exc:
            raise self._translate(exc) from None

    def _translate(self, exc: sqlite3.Error) -> DatabaseError:
        name, text = getattr(exc, "sqlite_errorname", ""), str(exc)
        if name == "SQLITE_FULL" or "disk is full" in text:
            return DiskFullError(f"disk full while writing the candidate database {self.path} ({text}); the "
                                 "failed write left nothing behind: free space or move the database, then resume")
        if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "not a database" in text or "malformed" in text:
            return NotACandidateDatabaseError(
                f"{self.path} is not a readable SQLite database ({text}); pass a path to a new file or to a "
                "database cuco created")
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")) or "readonly" in text \
                or "unable to open" in text:
            return DatabaseAccessError(
                f"cannot write the candidate database {self.path} ({text}): SQLite needs write access to the "
                f"file and its directory {self.path.parent} (for the -wal/-shm files); choose a writable "
                "location or fix its permissions")
        if _is_busy(exc):
            return DatabaseBusyError(f"{self.path} stayed locked for over {self._busy_timeout_s:.0f} s ({text}); "
                                     "another process holds a long transaction: stop it or retry")
        return DatabaseError(f"candidate database {self.path}: {text}")

    # -- writes --------------------------------------------------------------------------------------
    @staticmethod
    def _row(c: Candidate) -> tuple[Any, ...]:
        try:
            data = json.dumps(c.to_dict())
        except (TypeError, ValueError) as exc:
            raise DatabaseError(f"candidate {c.id} holds a value JSON cannot store ({exc}); keep results, "
                                "metrics and data to plain str/int/float/bool/list/dict") from None
        fitness = None if c.fitness is None else float(c.fitness)
        return (c.id, c.workload, c.island, c.generation, c.parent_id, c.mutation, fitness, c.status,
                c.created_at, c.directives.label() if c.directives else None, data)

    def add(self, c: Candidate) -> None:
        """Insert a new candidate; raises DuplicateCandidateError if its id is already stored."""
        row = self._row(c)

        def insert(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM candidates WHERE id = ?", (c.id,)).fetchone():
                raise DuplicateCandidateError(
                    f"candidate {c.id} is already in {self.path}; use upsert() to store its new results")
            conn.execute(f"INSERT INTO candidates ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", row)
        self._run(True, insert)

    def upsert(self, c: Candidate) -> None:
        """Insert `c`, or replace the stored candidate with the same id (e.g. with new results)."""
        updates = ", ".join(f"{col} = excluded.{col}" for col in _COLUMNS.split(", ")[1:])
        sql = (f"INSERT INTO candidates ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
               f"ON CONFLICT(id) DO UPDATE SET {updates}")
        row = self._row(c)
        self._run(True, lambda conn: conn.execute(sql, row))

    def meta_set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable run-metadata value (workload name, seed, config) under `key`."""
        try:
            text = json.dumps(value, sort_keys=True)  # NaN/Infinity allowed: json.loads reads them back
        except (TypeError, ValueError) as exc:
            raise DatabaseError(f"meta value for {key!r} is not JSON-serialisable ({exc}); pass plain data") from None
        self._run(True, lambda conn: conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, text)))

    # -- reads ---------------------------------------------------------------------------------------
    def _select(self, where: str = "1", params: Iterable[Any] = (), tail: str = "ORDER BY rowid") -> list[Candidate]:
        rows = self._run(False, lambda conn: conn.execute(
            f"SELECT data FROM candidates WHERE {where} {tail}", tuple(params)).fetchall())
        return [Candidate.from_dict(json.loads(r[0])) for r in rows]

    @staticmethod
    def _filter(workload: str | None, island: int | None = None) -> tuple[str, list[Any]]:
        clauses, params = ["1"], []
        if workload is not None:
            clauses.append("workload = ?")
            params.append(workload)
        if island is not None:
            clauses.append("island = ?")
            params.append(island)
        return " AND ".join(clauses), params

    def get(self, candidate_id: str) -> Candidate:
        """The stored candidate with this id; raises UnknownCandidateError if there is none."""
        found = self._select("id = ?", (candidate_id,))
        if not found:
            raise UnknownCandidateError(f"no candidate {candidate_id!r} in {self.path}; check the id")
        return found[0]

    def __contains__(self, candidate_id: object) -> bool:
        return bool(self._run(False, lambda conn: conn.execute(
            "SELECT 1 FROM candidates WHERE id = ?", (candidate_id,)).fetchone()))

    def __len__(self) -> int:
        return int(self._run(False, lambda conn: conn.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]))

    def all(self, workload: str | None = None) -> list[Candidate]:
        """Every stored candidate (of `workload`, if given), in insertion order."""
        return self._select(*self._filter(workload))

    def to_pandas(self, workload: str | None = None, *, code: bool = False) -> "pandas.DataFrame":
        """Every stored candidate (of `workload`, if given) as a pandas DataFrame, one row each in insertion order
        (columns: cuco.frame.candidates_frame). Needs pandas; CucoError saying how to install it otherwise."""
        from cuco.frame import candidates_frame

        return candidates_frame(self.all(workload), code=code)

    def top_k(self, k: int, workload: str | None = None, island: int | None = None) -> list[Candidate]:
        """The k passed candidates of highest fitness, best first (ties: earliest stored first)."""
        if k < 0:
            raise DatabaseError(f"top_k needs k >= 0, got {k}")
        where, params = self._filter(workload, island)
        return self._select(f"{where} AND {_RANKED}", params, f"ORDER BY fitness DESC, rowid LIMIT {int(k)}")

    def best(self, workload: str | None = None) -> Candidate | None:
        """The passed candidate of highest fitness, or None if none passed."""
        top = self.top_k(1, workload)
        return top[0] if top else None

    def best_per_island(self, workload: str | None = None) -> dict[int, Candidate]:
        """island -> its best passed candidate (islands with no passed candidate are absent)."""
        where, params = self._filter(workload)
        ranked = (f"SELECT data, island, ROW_NUMBER() OVER (PARTITION BY island ORDER BY fitness DESC, rowid) AS r "
                  f"FROM candidates WHERE {where} AND {_RANKED}")
        rows = self._run(False, lambda conn: conn.execute(
            f"SELECT island, data FROM ({ranked}) WHERE r = 1 ORDER BY island", params).fetchall())
        return {int(i): Candidate.from_dict(json.loads(d)) for i, d in rows}

    def sample(self, island: int, n: int, rng: random.Random, workload: str | None = None) -> list[Candidate]:
        """Up to n distinct passed candidates of `island`, drawn with `rng` (same rng state, same draw)."""
        where, params = self._filter(workload, island)
        ids = [r[0] for r in self._run(False, lambda conn: conn.execute(
            f"SELECT id FROM candidates WHERE {where} AND (status = 'passed' OR ({_RANKED})) ORDER BY rowid",
            params).fetchall())]
        chosen = rng.sample(ids, min(max(n, 0), len(ids)))
        by_id = {c.id: c for c in self._select(f"id IN ({','.join('?' * len(chosen))})", chosen)} if chosen else {}
        return [by_id[i] for i in chosen]

    def children_count(self, candidate_id: str) -> int:
        """How many stored candidates name `candidate_id` as their parent."""
        return int(self._run(False, lambda conn: conn.execute(
            "SELECT COUNT(*) FROM candidates WHERE parent_id = ?", (candidate_id,)).fetchone()[0]))

    def lineage(self, candidate_id: str) -> list[Candidate]:
        """Ancestors from the root (the first one whose parent is unset or not stored) down to `candidate_id`."""
        def walk(conn: sqlite3.Connection) -> list[Candidate]:
            chain: list[Candidate] = []
            seen: set[str] = set()
            next_id: str | None = candidate_id
            while next_id is not None and next_id not in seen:
                row = conn.execute("SELECT data FROM candidates WHERE id = ?", (next_id,)).fetchone()
                if row is None:
                    break
                seen.add(next_id)
                chain.append(Candidate.from_dict(json.loads(row[0])))
                next_id = chain[-1].parent_id
            return chain
        chain = self._run(False, walk)
        if not chain:
            raise UnknownCandidateError(f"no candidate {candidate_id!r} in {self.path}; check the id")
        return chain[::-1]

    def count_by_status(self, workload: str | None = None) -> dict[str, int]:
        """status ('pending', 'passed', 'unmeasured', 'failed:<level>') -> number of candidates."""
        where, params = self._filter(workload)
        rows = self._run(False, lambda conn: conn.execute(
            f"SELECT status, COUNT(*) FROM candidates WHERE {where} GROUP BY status", params).fetchall())
        return {s: int(n) for s, n in rows}

    def meta_get(self, key: str, default: Any = None) -> Any:
        """The value stored by `meta_set(key, ...)`, or `default`."""
        row = self._run(False, lambda conn: conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone())
        return default if row is None else json.loads(row[0])

    def integrity_check(self) -> str:
        """SQLite's own consistency check: 'ok' for a sound file."""
        return str(self._run(False, lambda conn: conn.execute("PRAGMA integrity_check").fetchone()[0]))

    # -- lifetime ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (idempotent); later calls raise DatabaseError."""
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                self._conn.close()
            self._conn = None

    def __enter__(self) -> "CandidateDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CandidateDB({str(self.path)!r})"
