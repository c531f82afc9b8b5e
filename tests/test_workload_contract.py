"""The contract every built-in workload keeps: each legal point renders with one EVOLVE block, frozen text
byte-identical across points, the static check passes, its fixtures.py holds a never-waits candidate that only
verification can reject; CI compiles a sample covering every directive value and the never-waits fixture."""

from __future__ import annotations

import importlib

import pytest

from cuco import workloads
from cuco.design_space import Topology
from cuco.evaluate.static import check_static
from cuco.kit.evolve import frozen_text, split
from cuco.kit.sample import covering_points

NAMES = workloads.available()


def _points(name: str):
    wl = workloads.get(name)
    return wl, list(wl.space(Topology(world=wl.default_world)).points())


@pytest.mark.parametrize("name", NAMES)
def test_one_node_spaces_are_the_same_at_every_world_size(name):
    """A point's source does not depend on W (the world size is a runtime dim), and within one node every W has the
    same legal points: what the exhaustive compile builds at the default world is every point of W = 2, 4 and 8."""
    wl = workloads.get(name)
    at = {w: {p.label() for p in wl.space(Topology(world=w)).points()} for w in (1, 2, 4, 8)}
    assert len({frozenset(v) for v in at.values()}) == 1, {w: len(v) for w, v in at.items()}


@pytest.mark.parametrize("name", NAMES)
def test_every_point_renders_with_one_block_and_shared_frozen_text(name):
    wl, points = _points(name)
    assert points, f"{name} has no legal point"
    frozen = set()
    for p in points:
        code = wl.render(p)
        head, block, tail = split(code)
        assert block.strip(), p.label()
        assert p.label() not in head + tail, f"{name}: the label of {p.label()} sits in frozen code"
        frozen.add(frozen_text(code))
    assert len(frozen) == 1, f"{name}: frozen text differs between points ({len(frozen)} variants)"


@pytest.mark.parametrize("name", NAMES)
def test_every_point_passes_the_static_check_against_a_sibling(name):
    wl, points = _points(name)
    parent = wl.render(points[0])
    bad = []
    for p in points:
        result = check_static(wl.render(p), parent_code=parent)
        if not result.passed:
            bad.append((p.label(), result.reason[:300]))
    assert not bad, bad[:3]


@pytest.mark.parametrize("name", NAMES)
def test_covering_sample_uses_every_value(name):
    wl, points = _points(name)
    space = wl.space(Topology(world=wl.default_world))
    sample = covering_points(space)
    for d in space.names:
        assert {p.get(d) for p in sample} == {p.get(d) for p in points}, d
    assert len(sample) <= sum(len(space.values(d)) for d in space.names)


def _never_waits(name: str) -> str:
    return importlib.import_module(f"cuco.workloads.{name}.fixtures").never_waits()


@pytest.mark.parametrize("name", NAMES)
def test_never_waits_fixture_is_a_legal_candidate(name):
    """docs/workloads.md: every workload's fixtures.py has `never_waits()`, a candidate that skips its wait on the
    remote arrival. It keeps the frozen text and passes the static check against a sibling, so only verification
    under delayed arrival can reject it (the workload's GPU test requires it to)."""
    wl, points = _points(name)
    code, parent = _never_waits(name), wl.render(points[0])
    assert frozen_text(code) == frozen_text(parent)
    result = check_static(code, parent_code=parent)
    assert result.passed, result.reason


# ---- compile (nvcc): plugin, seed and the covering sample of every workload ------------------------------

@pytest.fixture(scope="module")
def compiler():
    from cuco.evaluate.compile import Compiler
    from cuco.toolchain import ToolchainError

    try:
        return Compiler(arch="sm_90", jobs=2)
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")


@pytest.mark.parametrize("name", NAMES)
def test_plugin_seed_and_covering_sample_compile(name, compiler):
    """CI's compile budget: every directive value of every workload is compiled at least once, and its never-waits
    fixture (the exhaustive compile of every point is `pytest -m exhaustive`)."""
    from cuco.harness.build import compile_shared
    from cuco.kit.compute import link_options

    wl = workloads.get(name)
    link = link_options(wl, compiler.toolchain)  # builds the workload's compute library once (cached)
    plugin = compile_shared(wl.plugin_path().resolve(), link.libraries, toolchain=compiler.toolchain,
                            include_dirs=link.include_dirs, extra=link.extra)
    assert plugin.ok, plugin.log[-2000:]
    sample = covering_points(wl.space(Topology(world=wl.default_world)))
    codes = [wl.seed_code(), *(wl.render(p) for p in sample), _never_waits(name)]
    labels = ["seed", *(p.label() for p in sample), "fixture never_waits"]
    outcomes = compiler.compile_many(codes, link.libraries, link.include_dirs, link.extra)
    failed = [(label, o.log_excerpt) for label, o in zip(labels, outcomes) if not o.ok]
    assert not failed, failed[:2]


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", NAMES)
def test_every_point_compiles(name, compiler):
    """Outside CI (`pytest -m exhaustive`): every legal point of every workload compiles."""
    from cuco.kit.compute import link_options

    wl, points = _points(name)
    link = link_options(wl, compiler.toolchain)
    outcomes = compiler.compile_many([wl.render(p) for p in points], link.libraries, link.include_dirs, link.extra)
    failed = [(p.label(), o.log_excerpt) for p, o in zip(points, outcomes) if not o.ok]
    assert not failed, f"{len(failed)} of {len(points)} points failed: {failed[:2]}"
