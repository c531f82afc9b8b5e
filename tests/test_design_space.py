"""Properties of the design space: legality, neighbourhoods, serialisation, errors, sampling, distance."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cuco.design_space import (BACKENDS, CHUNK_SIZES, DIRECTIVE_NAMES, ISSUERS, PLACEMENTS, SYNC_SCOPES, WHOLE,
                               DesignSpace, DirectiveError, Directives, IllegalPointError, KiB, MiB, Topology,
                               format_bytes)
from cuco.errors import CucoError

FULL = DesignSpace()
ALL_POINTS = list(FULL.all_points())
FIELD = {"backend": "backends", "placement": "placements", "sync_scope": "sync_scopes", "issuer": "issuers",
         "chunk_bytes": "chunk_sizes"}
VALID_CHUNKS = (WHOLE,) + tuple(2**k for k in range(16, 31))


def subsets(options: tuple) -> st.SearchStrategy[tuple]:
    return st.lists(st.sampled_from(options), min_size=1, unique=True).map(tuple)


topologies = st.integers(1, 16).flatmap(lambda world: st.builds(
    Topology, world=st.just(world), nodes=st.integers(1, min(4, world)),
    gin_available=st.sampled_from((None, True, False)), nvshmem_available=st.sampled_from((None, True, False)),
    sm_count=st.integers(1, 200)))
spaces = st.builds(DesignSpace, backends=subsets(BACKENDS), placements=subsets(PLACEMENTS),
                   sync_scopes=subsets(SYNC_SCOPES), issuers=subsets(ISSUERS), chunk_sizes=subsets(CHUNK_SIZES),
                   topology=topologies, fused_grid_ctas=st.one_of(st.none(), st.integers(1, 400)),
                   max_coresident_ctas=st.one_of(st.none(), st.integers(1, 400)))
points = st.sampled_from(ALL_POINTS)


def differing(a: Directives, b: Directives) -> list[str]:
    return [n for n in DIRECTIVE_NAMES if getattr(a, n) != getattr(b, n)]


# -- legality --------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(spaces)
def test_enumerated_points_are_legal_and_complete(space: DesignSpace) -> None:
    legal = list(space.points())
    assert len(legal) == len(set(legal)) == space.size()
    for p in legal:
        assert space.check(p) is None and space.validate(p) is p
    illegal = [p for p in space.all_points() if not space.is_legal(p)]
    assert len(legal) + len(illegal) == len(list(space.all_points()))


@settings(max_examples=300, deadline=None)
@given(spaces, st.data())
def test_illegal_points_rejected_with_reason(space: DesignSpace, data: st.DataObject) -> None:
    p = data.draw(st.sampled_from(list(space.all_points())) | points)  # inside and outside the space
    reason = space.check(p)
    if reason is None:
        assert space.validate(p) is p
        return
    assert isinstance(reason, str) and reason.strip()
    with pytest.raises(IllegalPointError) as info:
        space.validate(p)
    assert info.value.reason == reason == str(info.value)
    assert isinstance(info.value, CucoError)


# -- neighbourhoods --------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(spaces, st.data())
def test_neighbours_differ_in_one_directive_and_are_legal(space: DesignSpace, data: st.DataObject) -> None:
    legal = list(space.points())
    assume(legal)
    p = data.draw(st.sampled_from(legal))
    nbrs = space.neighbours(p)
    assert len(nbrs) == len(set(nbrs))
    for q in nbrs:
        assert len(differing(p, q)) == 1 and space.is_legal(q)
    expected = {q for q in legal if len(differing(p, q)) == 1}
    assert set(nbrs) == expected


# -- serialisation ---------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(spaces)
def test_design_space_json_round_trip(space: DesignSpace) -> None:
    back = DesignSpace.from_json(space.to_json())
    assert back == space
    assert back.to_json() == space.to_json()
    assert list(back.points()) == list(space.points())


# -- errors ----------------------------------------------------------------------------------------


def test_space_rejects_bad_value_lists() -> None:
    with pytest.raises(DirectiveError):
        DesignSpace(backends=())
    with pytest.raises(DirectiveError):
        DesignSpace(backends=("lsa", "lsa"))
    with pytest.raises(DirectiveError) as info:
        DesignSpace(issuers=("thread", "block"))
    assert "block" in str(info.value) and "warp" in str(info.value)
    with pytest.raises(DirectiveError):
        DesignSpace.from_dict(dict(FULL.to_dict(), rules=["no-such-rule"]))
    with pytest.raises(DirectiveError):
        DesignSpace.from_dict(dict(FULL.to_dict(), colour="red"))


# -- sampling and distance -------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(spaces, st.integers(0, 2**32))
def test_sample_is_legal_and_reproducible(space: DesignSpace, seed: int) -> None:
    if space.size() == 0:
        with pytest.raises(IllegalPointError):
            space.sample(random.Random(seed), attempts=5)
        return
    a = [space.sample(random.Random(seed), attempts=attempts) for attempts in (10_000, 1)]
    for p in a:
        assert space.is_legal(p)
    assert space.sample(random.Random(seed)) == a[0]


def test_sample_covers_the_space() -> None:
    space = FULL.restrict(backends=("lsa",), chunk_sizes=(WHOLE, 4 * MiB))
    rng = random.Random(7)
    seen = {space.sample(rng) for _ in range(3000)}
    assert seen == set(space.points())


@settings(max_examples=300, deadline=None)
@given(points, points, points)
def test_distance_is_a_metric(a: Directives, b: Directives, c: Directives) -> None:
    d = FULL.distance
    assert d(a, a) == 0.0
    assert d(a, b) == d(b, a)
    assert (d(a, b) > 0) == (a != b)
    assert d(a, c) <= d(a, b) + d(b, c) + 1e-12
    assert 0.0 <= d(a, b) <= len(DIRECTIVE_NAMES)


def test_distance_values() -> None:
    p = Directives("lsa", "stream_overlap", "signal", "warp", 4 * MiB)
    assert FULL.distance(p, p.replace(chunk_bytes=16 * MiB)) == 0.5
    assert FULL.distance(p, p.replace(chunk_bytes=64 * KiB)) == 1.0  # capped
    assert FULL.distance(p, p.replace(chunk_bytes=WHOLE)) == 1.0
    assert FULL.distance(p, p.replace(backend="gin", issuer="cta")) == 2.0


# -- restrict, conservative, prompt -----------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(spaces, st.data())
def test_restrict(space: DesignSpace, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(DIRECTIVE_NAMES))
    full = space.values(name)
    keep = data.draw(st.lists(st.sampled_from(full), min_size=1, unique=True).map(tuple))
    sub = space.restrict(**{FIELD[name]: keep})
    assert sub.values(name) == keep
    assert set(sub.points()) <= set(space.points())
    assert set(sub.points()) == {p for p in space.points() if getattr(p, name) in keep}
    options = {"backend": BACKENDS, "placement": PLACEMENTS, "sync_scope": SYNC_SCOPES, "issuer": ISSUERS,
               "chunk_bytes": VALID_CHUNKS}[name]
    missing = [v for v in options if v not in full]
    if missing:
        extra = data.draw(st.sampled_from(missing))
        with pytest.raises(DirectiveError) as info:
            space.restrict(**{FIELD[name]: keep + (extra,)})
        assert str(extra) in str(info.value)


def test_restrict_rejects_unknown_fields_and_values() -> None:
    with pytest.raises(DirectiveError):
        FULL.restrict(transports=("lsa",))
    with pytest.raises(DirectiveError):
        FULL.restrict(backends=("tcp",))
    with pytest.raises(DirectiveError):
        FULL.restrict(chunk_sizes=(128 * KiB,))  # legal size, but not in this space
    with pytest.raises(DirectiveError):
        FULL.restrict(backends=("lsa",)).restrict(backends=("gin",))


@settings(max_examples=200, deadline=None)
@given(spaces)
def test_conservative_is_legal_and_deferred(space: DesignSpace) -> None:
    assume(space.size() > 0)
    p = space.conservative()
    assert space.is_legal(p)
    has_deferred = "deferred" in space.placements and "cta" in space.issuers and WHOLE in space.chunk_sizes
    reachable = any(space.is_legal(Directives(b, "deferred", s, "cta", WHOLE))
                    for b, s in itertools.product(space.backends, ("world", "team")) if s in space.sync_scopes)
    if has_deferred and reachable:
        assert (p.placement, p.issuer, p.chunk_bytes) == ("deferred", "cta", WHOLE)
    first = next((b for b in space.backends if any(
        space.is_legal(Directives(b, "deferred", s, "cta", WHOLE)) for s in space.sync_scopes)), None)
    if has_deferred and reachable and first is not None and any(
            space.is_legal(Directives(first, "deferred", s, "cta", WHOLE)) for s in ("world", "team")):
        assert p.sync_scope in ("world", "team")


def test_conservative_on_known_machines() -> None:
    assert FULL.conservative().label() == "lsa/deferred/world/cta/whole"
    assert DesignSpace(topology=Topology(world=16, nodes=2)).conservative().label() == "lsa/deferred/team/cta/whole"
    assert FULL.restrict(backends=("gin", "lsa")).conservative().backend == "gin"


@settings(max_examples=50, deadline=None)
@given(spaces)
def test_prompt_text_names_every_directive(space: DesignSpace) -> None:
    assume(space.size() > 0)
    text = space.prompt_text()
    for name in DIRECTIVE_NAMES:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"- {name}:"))
        for v in space.values(name):
            assert (format_bytes(v) if name == "chunk_bytes" else v) in line
    assert space.conservative().label() in text
    assert f"Legal points: {space.size()}" in text
    assert all(r.name in text for r in space.rules)


# -- regressions: defects found by the properties above ---------------------------------------------
EMPTY = DesignSpace(backends=("gin",), topology=Topology(gin_available=False))


def test_conservative_on_empty_space_raises_clear_error() -> None:
    with pytest.raises(IllegalPointError, match="no legal point"):
        EMPTY.conservative()


def test_conservative_prefers_world_or_team_over_backend_order() -> None:
    space = DesignSpace(backends=("lsa", "gin"), placements=("deferred",), sync_scopes=("world", "block"),
                        issuers=("cta",), chunk_sizes=(WHOLE,), topology=Topology(world=16, nodes=2))
    assert space.is_legal(Directives("gin", "deferred", "world", "cta", WHOLE))
    assert space.conservative().sync_scope in ("world", "team")


@pytest.mark.parametrize("text", ["{not json", "[1]"])
def test_design_space_bad_json_raises_directive_error(text: str) -> None:
    with pytest.raises(DirectiveError):
        DesignSpace.from_json(text)


def test_topology_rejects_more_nodes_than_ranks() -> None:
    with pytest.raises(DirectiveError, match="nodes must be <= world"):
        Topology(world=2, nodes=4)


def test_sample_takes_a_seed_a_random_stream_or_nothing() -> None:
    space = DesignSpace()
    assert space.sample(0) == space.sample(0) == space.sample(random.Random(0))
    assert space.is_legal(space.sample(0)) and space.is_legal(space.sample())
    with pytest.raises(TypeError, match="random.Random, an int seed or None"):
        space.sample("0")  # type: ignore[arg-type]


def test_complete_fills_only_the_extras_a_point_does_not_name() -> None:
    """A label from before a workload gained an extra directive names the point at that directive's conservative
    value; a value it names stays; one the space lacks is left for check() to refuse."""
    from cuco.extra_directives import ExtraDirective

    space = DesignSpace(extras=(ExtraDirective("form", ("a", "b")), ExtraDirective("dtype", ("bf16", "fp8"))))
    old = Directives.from_label("lsa/deferred/world/cta/whole")
    assert space.complete(old).label() == "lsa/deferred/world/cta/whole/dtype=bf16/form=a"
    assert space.is_legal(space.complete(old)) and not space.is_legal(old)
    named = Directives.from_label("lsa/deferred/world/cta/whole/form=b")
    assert space.complete(named).label() == "lsa/deferred/world/cta/whole/dtype=bf16/form=b"
    stranger = Directives.from_label("lsa/deferred/world/cta/whole/colour=red")
    assert "colour" in space.check(space.complete(stranger))
    assert DesignSpace().complete(old) is old
