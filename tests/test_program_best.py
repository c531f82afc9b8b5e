"""Never slower: the user's program is timed in every round beside the rewrites, and when no verified rewrite
beats it, it is the run's best (point 'original', its time from the same rounds, speedup exactly 1.0) and best/
holds it unchanged. On the CPU: a run directory whose database holds measured candidates."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from cuco import rundir
from cuco.candidate import LevelResult
from cuco.db import CandidateDB
from cuco.design_space import Topology
from cuco.run_options import RunOptions
from cuco.program.workload import ProgramWorkload
from cuco.run import Run

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"


def _summary(tmp_path: Path, speedups: list[float]):
    """Run.summary() over a database holding one timed rewrite per speedup (host 2.0 ms in their rounds)."""
    w = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu")
    fast = w.fast_path(Topology(world=2))
    run = Run(RunOptions(workload=str(w.program.path)))
    run.run_dir, run.workload, run.evaluation = tmp_path, w, "measured"
    with CandidateDB(tmp_path / rundir.DB_FILE) as db:
        for s in speedups:
            c = fast.evolve(id=f"c{s}".replace(".", "_"))
            for level in ("static", "compile", "verify"):
                c = c.with_result(LevelResult(level, True, "", 0.0, {"how": "bit-identical"}))
            c = c.with_result(LevelResult("bench", True, "", 0.0, {"runs_ms": [2.0 / s], "host_runs_ms": [2.0, 2.1],
                                                                   "device": "X"}))
            db.add(c.evolve(metrics={"time_ms": 2.0 / s, "host_ms": 2.0, "speedup": s, "cold_ms": 9.0},
                            fitness=s))
        run.db = db  # the run's one database, as Run.open would hand it
        return w, run.summary()


@pytest.mark.parametrize("speedups", [[0.28, 0.3], [0.97], [1.0]])
def test_the_program_itself_is_best_when_no_rewrite_beats_it(tmp_path, speedups):
    w, s = _summary(tmp_path, speedups)
    assert s.best.mutation == "original"
    m = s.best.metrics
    assert m["speedup"] == 1.0 and m["time_ms"] == m["host_ms"] == 2.0 and m["cold_ms"] == 9.0
    assert m["fastest_rewrite_ms"] == pytest.approx(2.0 / max(speedups))
    assert s.to_dict()["best"]["point"] == "original" and "no verified rewrite was faster" in s.text()
    assert s.best.results["bench"].data["runs_ms"] == [2.0, 2.1]   # the host's runs, from the same rounds
    info = json.loads((tmp_path / "best" / "best.json").read_text())
    assert info["point"] == "original" and info["is_original"] and info["metrics"]["speedup"] == 1.0
    assert (tmp_path / "best" / "kernel.cu").read_text() == w.program.text   # the user's program, unchanged
    assert json.loads((tmp_path / "summary.json").read_text())["best"]["point"] == "original"


def test_a_faster_rewrite_stays_best(tmp_path):
    _w, s = _summary(tmp_path, [0.5, 1.4])
    assert s.best.mutation == "fastpath" and s.best.metrics["speedup"] == 1.4
    assert json.loads((tmp_path / "best" / "best.json").read_text())["is_original"] is False


def test_an_interrupted_run_still_writes_its_best_so_far_and_says_it_was_interrupted(tmp_path, monkeypatch):
    from cuco import run as run_module

    w = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu")
    _w, _s = _summary(tmp_path, [1.4])
    (tmp_path / "summary.json").unlink()
    shutil.rmtree(tmp_path / "best")
    run = Run(RunOptions(workload=str(w.program.path)))
    run.run_dir, run.workload, run.evaluation = tmp_path, w, "measured"

    def interrupted() -> None:
        raise KeyboardInterrupt

    run.seed, run.search = (lambda: None), interrupted
    with CandidateDB(tmp_path / rundir.DB_FILE) as db:
        run.db = db
        monkeypatch.setattr(run_module.Run, "open",
                            classmethod(lambda cls, opts, on_event: contextlib.nullcontext(run)))
        with pytest.raises(KeyboardInterrupt):
            run_module.run_workload(RunOptions(workload=str(w.program.path)))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["best"]["metrics"]["speedup"] == 1.4 and any("interrupted" in n for n in summary["notes"])
    assert json.loads((tmp_path / "best" / "best.json").read_text())["metrics"]["speedup"] == 1.4
