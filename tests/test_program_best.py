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


def _summary(tmp_path: Path, speedups: list[float], runner=None, confirm: bool = True, said=None):
    """Run.summary() over a database holding one timed rewrite per speedup (host 2.0 ms in their rounds); with a
    runner, Run.confirm() first, re-timing the winner on it."""
    w = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu")
    fast = w.fast_path(Topology(world=2))
    run = Run(RunOptions(workload=str(w.program.path), confirm=confirm), on_event=None if said is None else said.append)
    run.run_dir, run.workload, run.evaluation, run.runner = tmp_path, w, "measured", runner
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
        if runner is not None:
            run.confirm()
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


class RetimingRunnerStandIn:
    """A unit-test stand-in for ProgramEvaluator.retime: fresh interleaved rounds as given, or a failure."""

    def __init__(self, rounds=None, error=None):
        self.rounds, self.error, self.codes = rounds, error, []

    def retime(self, code):
        from cuco.program.retime import Retimed, Round
        from cuco.program.source import ProgramError

        self.codes.append(code)
        if self.error:
            raise ProgramError(self.error)
        return Retimed(tuple(Round(h, 9.5, b, 8.0) for h, b in self.rounds))


def test_a_rewrite_whose_win_fresh_rounds_do_not_show_is_not_offered(tmp_path):
    """1.4x in the search's rounds, slower in five fresh pairs: the program itself is the best, with those rounds'
    figures, and says so."""
    runner = RetimingRunnerStandIn([(2.0, 2.04), (2.01, 2.05), (2.0, 2.03), (1.99, 2.04), (2.0, 2.05)])
    said: list[str] = []
    w, s = _summary(tmp_path, [0.5, 1.4], runner, said=said)
    assert any("5 fresh rounds" in line and "not offered" in line for line in said)
    assert len(runner.codes) == 1   # the winner only
    m = s.best.metrics
    assert s.best.mutation == "original" and m["speedup"] == 1.0 and m["host_ms"] == m["time_ms"] == 2.0
    assert m["fastest_rewrite_ms"] == pytest.approx(2.04) and m["cold_ms"] == 9.5
    assert "5 fresh rounds" in s.best.feedback and m["record_faster"] == 0.0 and m["record_repeats"] == 5.0
    assert (tmp_path / "best" / "kernel.cu").read_text() == w.program.text


def test_a_rewrite_faster_in_fresh_rounds_is_offered_with_their_verdict(tmp_path):
    runner = RetimingRunnerStandIn([(2.0, 1.5), (2.02, 1.51), (2.01, 1.5)])
    _w, s = _summary(tmp_path, [1.4], runner)
    m = s.best.metrics
    assert s.best.mutation == "fastpath" and m["record_faster"] == 1.0 and m["record_repeats"] == 3.0
    assert m["record_speedup"] == pytest.approx(2.01 / 1.5)
    # what the user is told is the fresh rounds' figure; the search's stays beside it
    assert m["speedup"] == m["record_speedup"] and m["time_ms"] == 1.5 and m["host_ms"] == 2.01
    assert m["search_speedup"] == 1.4 and m["search_time_ms"] == pytest.approx(2.0 / 1.4)


def test_a_rewrite_that_fails_when_re_timed_is_not_offered_and_the_reason_is_said(tmp_path):
    runner = RetimingRunnerStandIn(error="re-timing, the rewrite read back other bytes than the program:\n  x[3]")
    said: list[str] = []
    _w, s = _summary(tmp_path, [1.4], runner, said=said)
    assert s.best.mutation == "original" and s.best.metrics["speedup"] == 1.0
    assert "failed when re-timed against it" in s.best.feedback and "x[3]" in s.best.feedback
    assert any("failed when re-timed" in line and "x[3]" in line for line in said)   # the console says why


def test_no_re_timing_when_asked_not_to_when_nothing_won_or_when_already_settled(tmp_path):
    runner = RetimingRunnerStandIn([(2.0, 1.5)] * 3)
    _summary(tmp_path / "a", [1.4], runner, confirm=False)
    _summary(tmp_path / "b", [0.9], runner)   # the program already wins: nothing to confirm
    assert runner.codes == []
    w = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu")
    settled = w.fast_path(Topology(world=2)).evolve(metrics={"speedup": 1.4, "record_faster": 1.0})
    assert w.confirm(settled, runner) is settled and runner.codes == []   # a resumed run keeps its verdict
