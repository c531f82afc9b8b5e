"""What the candidate database can fail with (cuco.db.CandidateDB): one error class per cause, each message
naming the file, the problem and the fix."""

from __future__ import annotations

from cuco.errors import CucoError


class DatabaseError(CucoError):
    """The candidate database cannot be used; the message names the file, the problem and the fix."""


class SchemaVersionError(DatabaseError):
    """The file was written with a table layout this cuco cannot read."""


class NotACandidateDatabaseError(DatabaseError):
    """The file is not a cuco candidate database (not SQLite, corrupt, or another program's database)."""


class DatabaseAccessError(DatabaseError):
    """The file or its directory cannot be written (read-only location, permissions, missing directory)."""


class DiskFullError(DatabaseError):
    """The disk (or SQLite's page limit) is full; the failed write left nothing behind."""


class DatabaseBusyError(DatabaseError):
    """Another process kept the database locked for longer than the busy timeout."""


class DuplicateCandidateError(DatabaseError):
    """`add` was given a candidate whose id is already stored; use `upsert` to update it."""


class UnknownCandidateError(DatabaseError, KeyError):
    """No candidate with this id is stored."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])
