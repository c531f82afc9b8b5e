"""Candidate: serialisation round trips, status transitions, lineage of children."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.candidate import LEVELS, MUTATIONS, Candidate, LevelResult
from cuco.design_space import DesignSpace

POINTS = list(DesignSpace().all_points())
finite = st.floats(allow_nan=False, allow_infinity=False)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), finite, st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


@st.composite
def level_results(draw: st.DrawFn) -> dict[str, LevelResult]:
    levels = draw(st.lists(st.sampled_from(LEVELS), unique=True))
    return {lv: LevelResult(lv, draw(st.booleans()), draw(st.text(max_size=40)), draw(finite),
                            draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3)))
            for lv in levels}


candidates = st.builds(
    Candidate,
    code=st.text(max_size=200),
    workload=st.text(min_size=1, max_size=20),
    directives=st.one_of(st.none(), st.sampled_from(POINTS)),
    id=st.text(min_size=1, max_size=32),
    parent_id=st.one_of(st.none(), st.text(min_size=1, max_size=32)),
    inspiration_ids=st.lists(st.text(min_size=1, max_size=8), max_size=3),
    island=st.integers(0, 64),
    generation=st.integers(0, 10_000),
    mutation=st.sampled_from(MUTATIONS),
    results=level_results(),
    metrics=st.dictionaries(st.text(max_size=10), finite, max_size=4),
    fitness=st.one_of(st.none(), finite),
    feedback=st.text(max_size=100),
    llm_cost_usd=st.floats(0, 100),
    created_at=st.floats(0, 4e9),
)


@settings(max_examples=200, deadline=None)
@given(candidates)
def test_dict_round_trip(c: Candidate) -> None:
    assert Candidate.from_dict(c.to_dict()) == c


@settings(max_examples=200, deadline=None)
@given(candidates)
def test_json_round_trip(c: Candidate) -> None:
    text = json.dumps(c.to_dict())
    back = Candidate.from_dict(json.loads(text))
    assert back == c
    assert back.status == c.status
    assert json.dumps(back.to_dict()) == text


def test_level_result_rejects_unknown_level() -> None:
    with pytest.raises(ValueError):
        LevelResult("link", True)


def test_mutation_must_be_known() -> None:
    with pytest.raises(ValueError):
        Candidate(code="", workload="w", mutation="guess")


def test_status_transitions() -> None:
    c = Candidate(code="k", workload="w")
    assert c.status == "pending" and not c.failed and c.last_level is None
    for i, level in enumerate(LEVELS):
        c = c.with_result(LevelResult(level, True))
        assert c.last_level == level
        assert c.status == ("passed" if i == len(LEVELS) - 1 else "pending")
    assert not c.failed
    # A failing level makes the candidate failed at that level, whatever comes after it.
    for level in LEVELS:
        bad = c.with_result(LevelResult(level, False, "boom"))
        assert bad.status == f"failed:{level}" and bad.failed
        assert bad.results[level].reason == "boom"
        assert c.results[level].passed  # immutable: the original is unchanged
    early = Candidate(code="k", workload="w").with_result(LevelResult("static", True)).with_result(
        LevelResult("compile", False, "nvcc error"))
    assert early.status == "failed:compile" and early.last_level == "compile"
    # Re-running a level replaces its result.
    fixed = early.with_result(LevelResult("compile", True))
    assert fixed.status == "pending" and fixed.last_level == "compile"


@given(level_results())
def test_status_matches_first_missing_or_failed_level(results: dict[str, LevelResult]) -> None:
    c = Candidate(code="k", workload="w", results=results)
    expected = "passed"
    for level in LEVELS:
        if level not in results:
            expected = "pending"
            break
        if not results[level].passed:
            expected = f"failed:{level}"
            break
    assert c.status == expected
    assert c.failed == expected.startswith("failed")


def test_child_lineage() -> None:
    space = DesignSpace()
    root = Candidate(code="a", workload="ag_gemm", directives=space.conservative(), island=3, generation=0,
                     fitness=1.0).with_result(LevelResult("static", True))
    point = space.neighbours(space.conservative())[0]
    kid = root.child("b", point, "directive", feedback="moved one directive")
    assert kid.parent_id == root.id and kid.id != root.id
    assert kid.workload == root.workload and kid.island == root.island
    assert kid.generation == root.generation + 1
    assert kid.mutation == "directive" and kid.directives == point and kid.code == "b"
    assert kid.results == {} and kid.fitness is None and kid.status == "pending"
    assert kid.feedback == "moved one directive"
    grandkid = kid.child("c", None, "llm_diff", inspiration_ids=(root.id,))
    assert grandkid.parent_id == kid.id and grandkid.generation == 2 and grandkid.island == 3
    assert grandkid.inspiration_ids == (root.id,)
    migrated = grandkid.evolve(island=5)  # moving to another island keeps id and lineage
    assert migrated.id == grandkid.id and migrated.parent_id == kid.id and migrated.island == 5
    placed = kid.child("d", None, "llm_cross", island=7, generation=9)  # overrides win over inherited values
    assert placed.island == 7 and placed.generation == 9 and placed.parent_id == kid.id
    assert len({root.id, kid.id, grandkid.id}) == 3


def test_evolve_keeps_id_and_is_frozen() -> None:
    c = Candidate(code="a", workload="w")
    d = c.evolve(fitness=2.5)
    assert d.id == c.id and d.fitness == 2.5 and c.fitness is None
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        c.fitness = 1.0  # type: ignore[misc]
