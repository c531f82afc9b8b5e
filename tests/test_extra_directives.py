"""Workload-specific directives: validated, in labels, JSON, neighbours, enumeration and prompt text."""

from __future__ import annotations

import random

import pytest

from cuco.design_space import DesignSpace, DirectiveError, Directives, Topology, WHOLE
from cuco.extra_directives import ExtraDirective

DTYPE = ExtraDirective("dispatch_dtype", ("bf16", "fp8"), "payload type of the token dispatch")
SPACE = DesignSpace(backends=("lsa",), chunk_sizes=(WHOLE, 1 << 20), topology=Topology(world=2), extras=(DTYPE,))


def test_points_enumerate_every_extra_value():
    points = list(SPACE.points())
    base = DesignSpace(backends=("lsa",), chunk_sizes=(WHOLE, 1 << 20), topology=Topology(world=2))
    assert len(points) == 2 * base.size()
    assert {p.get("dispatch_dtype") for p in points} == {"bf16", "fp8"}
    assert SPACE.names[-1] == "dispatch_dtype" and SPACE.values("dispatch_dtype") == ("bf16", "fp8")


def test_label_and_json_round_trip():
    p = Directives("lsa", "stream_overlap", "team", "cta", 1 << 20, {"dispatch_dtype": "fp8"})
    assert p.label() == "lsa/stream_overlap/team/cta/1MiB/dispatch_dtype=fp8"
    assert Directives.from_label(p.label()) == p
    assert Directives.from_json(p.to_json()) == p
    plain = Directives("lsa", "deferred", "world", "cta", WHOLE)
    assert "extra" not in plain.to_dict() and plain.label().count("/") == 4


def test_check_names_missing_unknown_and_bad_values():
    core = Directives("lsa", "deferred", "world", "cta", WHOLE)
    assert "dispatch_dtype" in SPACE.check(core)
    assert "fp4" in SPACE.check(core.replace(extra={"dispatch_dtype": "fp4"}))
    assert SPACE.check(core.replace(extra={"dispatch_dtype": "fp8"})) is None
    with pytest.raises(DirectiveError, match="lower_snake_case"):
        Directives("lsa", "deferred", "world", "cta", WHOLE, {"Bad-Name": "x"})
    with pytest.raises(DirectiveError, match="non-empty strings"):
        Directives("lsa", "deferred", "world", "cta", WHOLE, {"dispatch_dtype": "a/b"})
    with pytest.raises(DirectiveError, match="not one of"):
        ExtraDirective("backend", ("x",))
    with pytest.raises(DirectiveError, match="at least one value"):
        ExtraDirective("tokens", ())


def test_neighbours_move_extras_and_replace_keeps_them():
    p = SPACE.conservative()
    assert p.get("dispatch_dtype") == "bf16"
    moved = [q for q in SPACE.neighbours(p) if q.get("dispatch_dtype") == "fp8"]
    assert moved == [p.replace(dispatch_dtype="fp8")]
    assert SPACE.distance(p, moved[0]) == 1.0
    with pytest.raises(DirectiveError, match="no directive 'tile'"):
        p.replace(tile="x")


def test_space_json_and_prompt_carry_extras():
    again = DesignSpace.from_json(SPACE.to_json())
    assert again.extras == (DTYPE,) and again.size() == SPACE.size()
    text = SPACE.prompt_text()
    assert "dispatch_dtype: bf16 | fp8 -- payload type of the token dispatch" in text
    assert SPACE.sample(random.Random(3)).get("dispatch_dtype") in ("bf16", "fp8")
    with pytest.raises(DirectiveError, match="named twice"):
        DesignSpace(extras=(DTYPE, DTYPE))
