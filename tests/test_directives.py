"""Directives as values: round trips through dicts, JSON and labels, chunk sizes as bytes, and errors that name the
valid values."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cuco.design_space import DesignSpace
from cuco.directives import (BACKENDS, DIRECTIVE_NAMES, ISSUERS, MAX_CHUNK, MIN_CHUNK, PLACEMENTS, SYNC_SCOPES, WHOLE,
                             Directives, MiB, format_bytes, parse_bytes)
from cuco.extra_directives import DirectiveError

FULL = DesignSpace()
ALL_POINTS = list(FULL.all_points())
VALID_CHUNKS = (WHOLE,) + tuple(2**k for k in range(16, 31))
points = st.sampled_from(ALL_POINTS)


@given(points)
def test_directives_round_trips(p: Directives) -> None:
    assert Directives.from_dict(p.to_dict()) == p
    assert Directives.from_json(p.to_json()) == p
    assert Directives.from_json(json.dumps(p.to_dict())) == p
    assert Directives.from_label(p.label()) == p
    assert p.label().count("/") == 4
    as_text = dict(p.to_dict(), chunk_bytes=format_bytes(p.chunk_bytes))  # LLMs write sizes as text
    assert Directives.from_dict(as_text) == p


def test_labels_are_distinct() -> None:
    assert len({p.label() for p in ALL_POINTS}) == len(ALL_POINTS)
    label = Directives("lsa", "stream_overlap", "signal", "warp", 4 * MiB).label()
    assert label == "lsa/stream_overlap/signal/warp/4MiB"


@given(st.sampled_from(VALID_CHUNKS))
def test_bytes_round_trip(n: int) -> None:
    assert parse_bytes(format_bytes(n)) == n
    assert parse_bytes(str(n)) == n


@pytest.mark.parametrize("name,options", [("backend", BACKENDS), ("placement", PLACEMENTS),
                                          ("sync_scope", SYNC_SCOPES), ("issuer", ISSUERS)])
def test_unknown_value_names_valid_values(name: str, options: tuple) -> None:
    values = dict(FULL.conservative().to_dict(), **{name: "bogus"})
    with pytest.raises(DirectiveError) as info:
        Directives(**values)
    msg = str(info.value)
    assert "bogus" in msg and name in msg and all(o in msg for o in options)
    with pytest.raises(DirectiveError):
        Directives.from_dict(values)


def test_unknown_or_missing_directive_names() -> None:
    base = FULL.conservative().to_dict()
    with pytest.raises(DirectiveError) as info:
        Directives.from_dict(dict(base, transport="lsa"))
    assert "transport" in str(info.value) and all(n in str(info.value) for n in DIRECTIVE_NAMES)
    with pytest.raises(DirectiveError) as info:
        Directives.from_dict({k: v for k, v in base.items() if k != "issuer"})
    assert "issuer" in str(info.value)
    with pytest.raises(DirectiveError) as info:
        FULL.values("transport")
    assert all(n in str(info.value) for n in DIRECTIVE_NAMES)
    for bad in ("{not json", "[1, 2]", "3"):
        with pytest.raises(DirectiveError):
            Directives.from_json(bad)
    for bad in ("lsa/deferred/world/cta", "lsa/deferred/world/cta/whole/x", "lsa/deferred/world/cta/4MB"):
        with pytest.raises(DirectiveError):
            Directives.from_label(bad)


@given(st.one_of(st.integers(-(2**40), 2**40), st.sampled_from([1, MIN_CHUNK // 2, MIN_CHUNK + 1, 3 * MiB,
                                                                 2 * MAX_CHUNK, -MIN_CHUNK])))
def test_out_of_range_chunk_rejected(n: int) -> None:
    assume(n not in VALID_CHUNKS)
    with pytest.raises(DirectiveError) as info:
        Directives("lsa", "stream_overlap", "signal", "warp", n)
    msg = str(info.value)
    assert str(n) in msg and format_bytes(MIN_CHUNK) in msg and format_bytes(MAX_CHUNK) in msg
    with pytest.raises(DirectiveError):
        DesignSpace(chunk_sizes=(WHOLE, n))


@pytest.mark.parametrize("bad", [True, 1.5, "4MiB", None])
def test_chunk_must_be_int(bad: object) -> None:
    with pytest.raises(DirectiveError):
        Directives("lsa", "stream_overlap", "signal", "warp", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["4.5MiB", "4KB", "lots", "", "MiB"])
def test_unreadable_sizes(text: str) -> None:
    with pytest.raises(DirectiveError) as info:
        parse_bytes(text)
    assert "4MiB" in str(info.value)


def test_float_chunk_in_dict() -> None:
    base = FULL.conservative().to_dict()
    assert Directives.from_dict(dict(base, chunk_bytes=4194304.0)).chunk_bytes == 4194304
    with pytest.raises(DirectiveError):
        Directives.from_dict(dict(base, chunk_bytes=1.5))
    with pytest.raises(DirectiveError):
        Directives.from_dict(dict(base, chunk_bytes=[1]))
