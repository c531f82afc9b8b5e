"""EVOLVE-BLOCK handling, the directive mutator, the schedule, the novelty filter and the meta-summary."""

from __future__ import annotations

import random

import pytest
from test_search_workload import TOPOLOGY, make_workload, render

from cuco.candidate import LEVELS, Candidate, LevelResult
from cuco.search import blocks as blk
from cuco.search.meta import MetaSummarizer, offline_summary, parse_summary
from cuco.search.mutators.base import MutationContext
from cuco.search.mutators.directive import DirectiveMutator
from cuco.search.novelty import EmbeddingSimilarity, NoveltyFilter, jaccard, ngrams, tokens
from cuco.search.schedule import EXPLOIT, EXPLORE, Phase, Schedule, ScheduleError

W = make_workload()
SPACE = W.space(TOPOLOGY)
P0 = SPACE.conservative()
PARENT = Candidate(code=render(P0), workload=W.name, directives=P0)


def ctx(seen=()):
    return MutationContext(W, SPACE, seen=frozenset(seen))


# -- blocks -------------------------------------------------------------------------------------------
def test_split_and_join_round_trip_and_splice():
    code = "a\n// EVOLVE-BLOCK-START\nb\n// EVOLVE-BLOCK-END\nc\n// EVOLVE-BLOCK-START x\nd\n// EVOLVE-BLOCK-END\ne\n"
    sk = blk.split(code)
    assert sk.join() == code and sk.blocks == ("b\n", "d\n")
    assert sk.with_blocks(["B", "D\n"]).join() == code.replace("\nb\n", "\nB\n").replace("\nd\n", "\nD\n")
    with pytest.raises(blk.BlockError, match="expected 2"):
        sk.with_blocks(["x"])


@pytest.mark.parametrize("code, why", [
    ("// EVOLVE-BLOCK-START\nx\n", "never closed"),
    ("x\n// EVOLVE-BLOCK-END\n", "without a matching"),
    ("// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n", "do not nest"),
    ("int main() {}\n", "no EVOLVE block"),
])
def test_broken_markers_are_named(code, why):
    with pytest.raises(blk.BlockError, match=why):
        blk.split(code)


# -- directive mutator ----------------------------------------------------------------------------------
def test_near_moves_to_an_unevaluated_legal_neighbour_and_rerenders():
    m = DirectiveMutator()
    seen = {P0.label()} | {q.label() for q in SPACE.neighbours(P0)[:-1]}
    child = m.near(PARENT, ctx(seen), random.Random(0))
    assert child.directives == SPACE.neighbours(P0)[-1]  # the only unseen neighbour
    assert child.code == render(child.directives) and child.parent_id == PARENT.id
    assert child.mutation == "directive" and child.generation == 1


def test_near_with_every_neighbour_seen_goes_two_steps_out():
    seen = {P0.label()} | {q.label() for q in SPACE.neighbours(P0)}
    child = DirectiveMutator().near(PARENT, ctx(seen), random.Random(3))
    assert child.directives.label() not in seen and SPACE.is_legal(child.directives)


def test_far_sample_and_crossover_give_legal_unseen_points():
    m = DirectiveMutator()
    for seed in range(20):
        rng = random.Random(seed)
        far = m.far(PARENT, ctx({P0.label()}), rng)
        assert SPACE.is_legal(far.directives) and SPACE.distance(far.directives, P0) >= 1.5
        s = m.sample(PARENT, ctx({P0.label()}), rng)
        assert SPACE.is_legal(s.directives) and s.directives != P0
    other_point = [p for p in SPACE.points() if SPACE.distance(p, P0) >= 3][0]
    other = Candidate(code=render(other_point), workload=W.name, directives=other_point)
    for seed in range(20):
        x = m.crossover(PARENT, other, ctx({P0.label(), other_point.label()}), random.Random(seed))
        assert SPACE.is_legal(x.directives) and x.mutation == "directive_cross" and other.id in x.inspiration_ids
        for name, value in x.directives.to_dict().items():  # every directive from one of the parents, when possible
            if x.directives in SPACE.neighbours(P0) + SPACE.neighbours(other_point):
                continue
            assert value in (getattr(P0, name), getattr(other_point, name))


def test_near_prefers_values_that_scored_well():
    scores = {"issuer=warp": 2.0, "issuer=thread": 0.1, "sync_scope=team": 0.2, "sync_scope=block": 0.2,
              "sync_scope=signal": 0.2, "placement=fused": 0.3, "placement=split_put_wait": 0.3,
              "placement=stream_overlap": 0.3, "chunk_bytes=0": 1.0}
    m = DirectiveMutator(greed=1.0)
    c = MutationContext(W, SPACE, seen=frozenset({P0.label()}), value_scores=scores)
    picks = {m.near(PARENT, c, random.Random(s)).directives.issuer for s in range(10)}
    assert picks == {"warp"}


# -- schedule -------------------------------------------------------------------------------------------
def test_two_phase_schedule_split_and_mixes():
    s = Schedule()
    assert s.phase(39, 100).name == "explore" and s.phase(40, 100).name == "exploit"
    assert dict(EXPLORE.llm_mix) == {"llm_diff": 15, "llm_full": 70, "llm_cross": 15}
    assert dict(EXPLOIT.llm_mix) == {"llm_diff": 60, "llm_full": 25, "llm_cross": 15}
    assert EXPLORE.temperatures == (0.2, 0.5, 0.8) and EXPLOIT.temperatures == (0.0, 0.2, 0.5)
    rng = random.Random(0)
    ops = [s.step(i, 1000, rng, llm=True) for i in range(400)]
    full = sum(o.op == "llm_full" for o in ops) / 400
    assert 0.6 < full < 0.8 and {o.temperature for o in ops} == {0.2, 0.5, 0.8}
    offline = {s.step(i, 10, rng, llm=False).op for i in range(4, 10) for _ in range(20)}
    assert offline <= {"directive_near", "directive_cross"}
    assert Schedule.from_dict(s.to_dict()) == s


def test_schedule_rejects_bad_mixes():
    with pytest.raises(ScheduleError):
        Phase("x", {"llm_magic": 1}, {"directive_near": 1}, (0.1,))
    with pytest.raises(ScheduleError):
        Phase("x", {"llm_diff": 1}, {"llm_full": 1}, (0.1,))
    with pytest.raises(ScheduleError):
        Phase("x", {"llm_diff": 1}, {"directive_near": 1}, ())


# -- novelty --------------------------------------------------------------------------------------------
def test_token_ngrams_ignore_comments_and_layout():
    a = "int x = 1; // one\nfoo(x);"
    b = "int  x=1;\n/* other */ foo( x );"
    assert tokens(a) == tokens(b)
    assert jaccard(ngrams(tokens(a), 4), ngrams(tokens(b), 4)) == 1.0


def test_novelty_rejects_near_copies_and_accepts_directive_children_at_new_points():
    f = NoveltyFilter(threshold=0.9)
    copy = PARENT.child(PARENT.code.replace("// toy", "// a comment change only"), P0, "llm_full")
    assert f.check(copy, [PARENT], set()) is not None
    q = SPACE.neighbours(P0)[0]
    moved = PARENT.child(render(q), q, "directive")
    assert f.check(moved, [PARENT], {P0.label()}) is None
    again = PARENT.child(render(P0), P0, "directive")
    assert f.check(again, [PARENT], {P0.label()}) is not None  # same point, same code: not novel


def test_embedding_backend_uses_cosine_of_the_embedder():
    calls = []

    def embed(texts):
        calls.append(len(texts))
        return [[1.0, 0.0] if "kChunkBytes = 0" in t else [0.0, 1.0] for t in texts]

    f = NoveltyFilter(threshold=0.9, embedding=EmbeddingSimilarity("text-embedding-3-small", embed=embed))
    q = [p for p in SPACE.points() if p.chunk_bytes != 0][0]
    assert f.similarity(PARENT.code, PARENT.code) == pytest.approx(1.0)
    assert f.similarity(PARENT.code, render(q)) == pytest.approx(0.0)
    assert sum(calls) <= 2  # cached by text


# -- meta -----------------------------------------------------------------------------------------------
def _evaluated(point, fitness=None, fail_level=None, reason=""):
    c = Candidate(code=render(point), workload=W.name, directives=point)
    for lv in LEVELS:
        c = c.with_result(LevelResult(lv, lv != fail_level, reason if lv == fail_level else ""))
        if lv == fail_level:
            return c
    return c.evolve(fitness=fitness)


def test_offline_summary_names_winners_failures_and_untried_values():
    pts = list(SPACE.points())
    fused = [p for p in pts if p.placement == "fused"][:3]
    good = [p for p in pts if p.placement == "stream_overlap"][:3]
    cands = [_evaluated(p, fail_level="verify", reason="wrong result on rank 1") for p in fused]
    cands += [_evaluated(p, 1.0 + i / 10) for i, p in enumerate(good)] + [_evaluated(P0, 0.9)]
    s = offline_summary(cands, SPACE)
    text = " ".join(s.recommendations)
    assert len(s.recommendations) <= 5 and s.source == "offline"
    assert good[2].label() in text
    assert "avoid placement=fused" in text and "verify" in text and "wrong result" in text
    assert "untested" in text


def test_llm_summary_is_parsed_and_falls_back_when_malformed():
    ok = parse_summary("SCRATCHPAD: fused wins.\nRECOMMENDATIONS:\n1. try fused\n2. avoid world\n", 7)
    assert ok.recommendations == ("try fused", "avoid world") and ok.source == "llm"
    assert parse_summary("nothing useful", 7) is None
    assert MetaSummarizer(every=5).due(4, 5) and not MetaSummarizer(every=5).due(5, 9)


@pytest.mark.parametrize("space_of", ["moe", "program"])
def test_crossover_mixes_every_directive_of_a_space_with_extra_ones(space_of):
    """MoE's dispatch_dtype and a program's extra directives take part in the mix: a mix of the five core ones
    alone was illegal in such spaces, so every crossover silently became a neighbour step."""
    from pathlib import Path

    from cuco import workloads
    from cuco.design_space import Topology
    from cuco.program.workload import ProgramWorkload

    if space_of == "moe":
        wl = workloads.get("moe")
    else:
        wl = ProgramWorkload.load(Path(__file__).parent / "fixtures" / "host_programs" / "sp_mlp_ag_rs.cu")
    space = wl.space(Topology(world=2, nodes=1, gin_available=False, nvshmem_available=False))
    points = list(space.points())
    a = points[0]
    assert a.extra, "a space with extra directives"
    b = max(points, key=lambda p: sum(p.get(n) != a.get(n) for n in [*p.to_dict(), *dict(p.extra)] if n != "extra"))
    pa = Candidate(code=wl.render(a), workload=wl.name, directives=a)
    pb = Candidate(code=wl.render(b), workload=wl.name, directives=b)
    c = MutationContext(wl, space, seen=frozenset({a.label(), b.label()}))
    for seed in range(5):
        x = DirectiveMutator().crossover(pa, pb, c, random.Random(seed))
        assert x.mutation == "directive_cross" and space.is_legal(x.directives), x.mutation
        names = [n for n in x.directives.to_dict() if n != "extra"] + [n for n, _ in x.directives.extra]
        assert all(x.directives.get(n) in (a.get(n), b.get(n)) for n in names), x.directives.label()
