"""The finalists of benchmarks/search_rows.py: which of a search's candidates go on to the selection before the
figures of record."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import search_rows  # noqa: E402

from cuco.design_space import Directives  # noqa: E402


@attrs.frozen
class StoredCandidateDouble:
    """The fields of a stored candidate that the finalists read (a test double, not cuco.candidate.Candidate)."""
    id: str
    status: str
    fitness: float | None
    mutation: str
    directives: Directives | None


POINTS = ["lsa/deferred/world/cta/whole", "lsa/stream_overlap/team/copy_engine/whole",
          "lsa/split_put_wait/signal/warp/16MiB", "lsa/stream_overlap/world/thread/whole"]


def _cand(i: int, status: str, fitness: float | None, point: str | None, mutation: str = "directive"):
    return StoredCandidateDouble(f"c{i}", status, fitness, mutation, Directives.from_label(point) if point else None)


def test_finalists_are_the_best_points_once_each_without_host_or_fast_path():
    cands = [_cand(0, "passed", 1.0, None, "original"), _cand(1, "passed", 1.30, None, "fastpath"),
             _cand(2, "passed", 1.10, POINTS[0]), _cand(3, "passed", 1.20, POINTS[1]),
             _cand(4, "passed", 1.25, POINTS[1]), _cand(5, "verify_failed", 2.0, POINTS[2]),
             _cand(6, "passed", 1.05, POINTS[3]), _cand(7, "passed", None, POINTS[2])]
    got = search_rows.finalists(cands, 3)
    assert [c.id for c in got] == ["c4", "c2", "c6"]
    assert search_rows.finalists(cands, 1)[0].id == "c4"


@given(st.lists(st.tuples(st.sampled_from(["passed", "verify_failed", "bench_failed"]),
                          st.one_of(st.none(), st.floats(0.1, 3.0)), st.sampled_from(POINTS)), max_size=12),
       st.integers(1, 5))
def test_finalists_hold_only_ranked_distinct_points_best_first(specs, k):
    cands = [_cand(i, s, f, p) for i, (s, f, p) in enumerate(specs)]
    got = search_rows.finalists(cands, k)
    labels = [c.directives.label() for c in got]
    assert len(got) <= k and len(set(labels)) == len(labels)
    assert all(c.status == "passed" and c.fitness is not None for c in got)
    assert [c.fitness for c in got] == sorted((c.fitness for c in got), reverse=True)
    best = max((c.fitness for c in cands if c.status == "passed" and c.fitness is not None), default=None)
    assert (got[0].fitness if got else None) == best


def test_two_rewrites_without_a_point_are_two_finalists():
    """An LLM's rewrites have no design point: each is its own program, named by its id."""
    cands = [_cand(0, "passed", 1.2, None, "llm"), _cand(1, "passed", 1.1, None, "llm"),
             _cand(2, "passed", 1.0, POINTS[0])]
    got = search_rows.finalists(cands, 3)
    assert [search_rows.program_label(c) for c in got] == ["c0", "c1", POINTS[0]]
