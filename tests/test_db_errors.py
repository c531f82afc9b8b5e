"""The candidate database's errors: one family under CucoError, the same classes through cuco.db, and an unknown
id that reads as its message while still being a KeyError."""

from __future__ import annotations

import inspect

from cuco import db, db_errors
from cuco.errors import CucoError


def test_every_database_error_is_one_family_and_the_same_class_through_cuco_db():
    classes = [c for _, c in inspect.getmembers(db_errors, inspect.isclass) if c.__module__ == db_errors.__name__]
    assert len(classes) == 8
    for c in classes:
        assert issubclass(c, db_errors.DatabaseError) and issubclass(c, CucoError)
        assert getattr(db, c.__name__) is c


def test_an_unknown_id_reads_as_its_message_and_is_a_key_error():
    exc = db_errors.UnknownCandidateError("no candidate 'abc' in runs/x/candidates.db")
    assert str(exc) == "no candidate 'abc' in runs/x/candidates.db" and isinstance(exc, KeyError)
