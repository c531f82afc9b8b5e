"""Islands, migration, parent selection and the MAP-Elites archive, with property tests for their invariants."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_search_workload import TOPOLOGY, make_workload

from cuco.candidate import LEVELS, Candidate, LevelResult
from cuco.search import migration as mig
from cuco.search import selection
from cuco.search.archive import Archive, ArchiveError
from cuco.search.island import Island, IslandError, make_islands

W = make_workload()
POINTS = list(W.space(TOPOLOGY).points())


def passed(fitness: float, i: int = 0, island: int = 0) -> Candidate:
    c = Candidate(code=f"// {i}", workload=W.name, directives=POINTS[i % len(POINTS)], island=island,
                  fitness=fitness, created_at=float(i))
    for lv in LEVELS:
        c = c.with_result(LevelResult(lv, True))
    return c


fitnesses = st.lists(st.floats(0.01, 10.0, allow_nan=False), min_size=1, max_size=30)


@given(fitnesses, st.integers(1, 8), st.randoms(use_true_random=False))
def test_island_keeps_the_top_capacity_whatever_the_order(fs, cap, rnd):
    cands = [passed(f, i) for i, f in enumerate(fs)]
    a, b = Island(0, cap), Island(0, cap)
    a.extend(cands)
    shuffled = cands[:]
    rnd.shuffle(shuffled)
    b.extend(shuffled)
    assert [c.id for c in a.members()] == [c.id for c in b.members()]
    assert len(a) == min(cap, len(fs))
    assert a.best().fitness == max(fs)


def test_island_refuses_failed_and_pending_candidates():
    isl = Island(0, 4)
    pending = Candidate(code="x", workload=W.name, fitness=5.0)
    failed = pending.with_result(LevelResult("static", False, "bad"))
    assert not isl.add(pending) and not isl.add(failed) and len(isl) == 0
    with pytest.raises(IslandError):
        Island(0, 0)


@given(st.lists(fitnesses, min_size=2, max_size=5), st.integers(1, 6), st.floats(0.05, 1.0), st.booleans(),
       st.integers(0, 1000))
@settings(max_examples=60)
def test_ring_migration_invariants(pops, cap, rate, elitist, seed):
    islands = make_islands(len(pops), cap)
    n = 0
    for isl, fs in zip(islands, pops):
        for f in fs:
            isl.add(passed(f, n, isl.index))
            n += 1
    before = {i.index: (i.best().fitness, i.ids()) for i in islands}
    all_ids = set().union(*(i.ids() for i in islands))
    moves = mig.MigrationPolicy(1, rate, elitist).plan(islands, random.Random(seed))
    mig.apply(islands, moves)
    for m in moves:
        assert m.dst == (m.src + 1) % len(islands)  # ring
        assert m.candidate_id in before[m.src][1]  # only members travel
    for isl in islands:
        assert isl.best().fitness >= before[isl.index][0]  # nobody loses its best
        assert isl.ids() <= all_ids  # migration copies, never invents
        assert len(isl) <= cap
    if elitist:
        for isl in islands:  # each island's previous best reaches the next island (unless that one is full of better)
            nxt = islands[(isl.index + 1) % len(islands)]
            assert nxt.best().fitness >= before[isl.index][0]


def test_migration_schedule_and_single_island():
    p = mig.MigrationPolicy(interval=3)
    assert [g for g in range(10) if p.due(g)] == [3, 6, 9]
    assert not mig.MigrationPolicy(interval=0).due(5)
    assert p.plan(make_islands(1, 4), random.Random(0)) == []


policies = st.sampled_from([selection.Weighted(), selection.Weighted(sharpness=20), selection.PowerLaw(),
                            selection.PowerLaw(alpha=2.5), selection.Beam(1), selection.Beam(3)])


@given(policies, fitnesses, st.lists(st.integers(0, 5), min_size=30, max_size=30), st.integers(0, 10**6))
def test_selection_probabilities_are_a_distribution_over_members(policy, fs, kids, seed):
    members = [passed(f, i) for i, f in enumerate(fs)]
    children = {c.id: kids[i] for i, c in enumerate(members)}
    p = selection.probabilities(policy, members, children.get)
    assert len(p) == len(members) and all(x >= 0 for x in p) and abs(sum(p) - 1) < 1e-9
    assert selection.select(policy, members, random.Random(seed), children.get) in members


@given(fitnesses)
def test_weighted_prefers_fitter_and_childless_parents(fs):
    members = [passed(f, i) for i, f in enumerate(fs)]
    w = selection.Weighted().weights(members)
    for a, b in zip(members, w):
        for c, d in zip(members, w):
            if a.fitness > c.fitness:
                assert b >= d
    busy = selection.Weighted().weights(members, lambda _id: 3)
    assert all(x <= y + 1e-15 for x, y in zip(busy, w))


@given(fitnesses)
def test_power_law_is_monotone_in_rank_and_beam_only_picks_the_top(fs):
    members = [passed(f, i) for i, f in enumerate(fs)]
    p = selection.probabilities(selection.PowerLaw(), members)
    order = sorted(range(len(members)), key=lambda i: (-members[i].fitness, i))
    assert all(p[order[i]] >= p[order[i + 1]] - 1e-12 for i in range(len(order) - 1))
    beam = selection.probabilities(selection.Beam(2), members)
    assert {i for i, x in enumerate(beam) if x > 0} <= set(order[:2])


def test_selection_rejects_empty_populations_and_unknown_policies():
    with pytest.raises(selection.SelectionError):
        selection.select(selection.Weighted(), [], random.Random(0))
    with pytest.raises(selection.SelectionError, match="unknown selection policy"):
        selection.policy_from_dict({"name": "roulette"})
    assert selection.policy_from_dict({"name": "beam", "width": 2}) == selection.Beam(2)


def test_archive_keeps_one_elite_per_cell_and_offers_diverse_inspirations():
    arch = Archive(("placement", "sync_scope"), top_k=3)
    cands = [passed(1.0 + (i % 7) / 10, i) for i in range(60)]
    for c in cands:
        arch.add(c)
    cells = {}
    for c in cands:
        key = arch.cell(c)
        if key not in cells or c.fitness > cells[key].fitness:
            cells[key] = c
    assert {k: v.fitness for k, v in arch.elites().items()} == {k: v.fitness for k, v in cells.items()}
    assert [c.fitness for c in arch.top()] == sorted((c.fitness for c in cands), reverse=True)[:3]
    insp = arch.inspirations(4, random.Random(1), exclude=(arch.top()[0].id,))
    assert len(insp) == 4 and arch.top()[0].id not in {c.id for c in insp}
    assert len({arch.cell(c) for c in insp}) >= 2
    assert 0 < arch.coverage(W.space(TOPOLOGY)) <= 1


def test_archive_with_chunk_axis_and_bad_axes():
    arch = Archive(("chunk_bytes",))
    c = passed(1.0, 3)
    assert arch.add(c) and arch.cell(c)[0] in ("whole", "64KiB", "256KiB", "1MiB", "4MiB", "16MiB", "64MiB")
    assert not arch.add(passed(0.5, 3 + len(POINTS)))  # same cell, worse
    with pytest.raises(ArchiveError):
        Archive(("colour",))
