"""Never slower than the reference, for workloads as for users' programs: when no verified candidate beat the host
seed in its own timed rounds, the seed itself is the run's best (point 'original', the host time of those rounds,
speedup exactly 1.0), and best/ holds it. On the CPU: candidates with measured metrics, and a run directory whose
database holds them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from cuco import reference_best, rundir
from cuco.candidate import Candidate, LevelResult
from cuco.db import CandidateDB
from cuco.design_space import Directives
from cuco.run import Run
from cuco.run_options import RunOptions
from cuco.workloads import get

POINT = "lsa/deferred/world/cta/whole"


def _timed(code: str, speedup: float, host_ms: float = 2.0, **extra: float) -> Candidate:
    c = Candidate(code=code, workload="gemm_allgather", mutation="directive", directives=Directives.from_label(POINT))
    for level in ("static", "compile", "verify"):
        c = c.with_result(LevelResult(level, True, "", 0.0, {"how": "bit-identical"}))
    c = c.with_result(LevelResult("bench", True, "", 0.0, {"device": "X", "shape": "s"}))
    return c.evolve(metrics={"time_ms": host_ms / speedup, "host_ms": host_ms, "speedup": speedup, **extra},
                    fitness=speedup)


@settings(max_examples=60, deadline=None)
@given(speedup=st.floats(0.05, 20.0), host_ms=st.floats(1e-3, 1e3))
def test_the_best_is_never_slower_than_the_reference(speedup, host_ms):
    fastest = _timed("rewrite", speedup, host_ms, compute_ms=1.0, comm_ms=0.5)
    best = reference_best.best_of(fastest, "reference", "gemm_allgather", "The host seed")
    if speedup > 1.0:
        assert best is fastest
    else:
        assert best.mutation == "original" and best.code == "reference" and best.status == "passed"
        assert best.metrics["speedup"] == 1.0 and best.metrics["time_ms"] == best.metrics["host_ms"] == host_ms
        assert best.metrics["fastest_rewrite_ms"] == fastest.metrics["time_ms"]
        assert best.metrics["compute_ms"] == 1.0 and "overlap_efficiency" not in best.metrics
        assert best.results["bench"].data["fastest_rewrite_point"] == POINT
        assert "no verified rewrite was faster" in best.feedback
    assert best.metrics["speedup"] >= 1.0


def test_without_a_reference_time_the_fastest_stands():
    fastest = _timed("rewrite", 0.5)
    fastest = fastest.evolve(metrics={"time_ms": 1.0})
    assert reference_best.best_of(fastest, "reference", "gemm_allgather", "The host seed") is fastest


def _summary(tmp_path: Path, speedups: list[float]):
    """Run.summary() of a gemm_allgather run whose database holds one timed candidate per speedup."""
    w = get("gemm_allgather")
    run = Run(RunOptions(workload="gemm_allgather"))
    run.run_dir, run.workload, run.evaluation = tmp_path, w, "measured"
    with CandidateDB(tmp_path / rundir.DB_FILE) as db:
        for s in speedups:
            db.add(_timed(w.render(Directives.from_label(POINT)), s).evolve(id=f"c{s}".replace(".", "_")))
        run.db = db
        return w, run.summary()


@pytest.mark.parametrize("speedups", [[0.97], [1.0], [0.5, 0.99]])
def test_the_host_seed_is_a_workloads_best_when_nothing_beats_it(tmp_path, speedups):
    w, s = _summary(tmp_path, speedups)
    assert s.best.mutation == "original" and s.best.metrics["speedup"] == 1.0
    assert s.to_dict()["best"]["point"] == "original" and "no verified rewrite was faster" in s.text()
    info = json.loads((tmp_path / "best" / "best.json").read_text())
    assert info["point"] == "original" and info["is_original"] and info["metrics"]["time_ms"] == 2.0
    assert (tmp_path / "best" / "kernel.cu").read_text() == w.seed_code()


def test_a_faster_candidate_stays_a_workloads_best(tmp_path):
    _w, s = _summary(tmp_path, [0.9, 1.25])
    assert s.best.mutation == "directive" and s.best.metrics["speedup"] == 1.25
    assert json.loads((tmp_path / "best" / "best.json").read_text())["is_original"] is False
