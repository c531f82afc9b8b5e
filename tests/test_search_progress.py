"""Progress of a search, per candidate: each finished candidate is reported with the count, the time left and the
best so far; a redirected output gets plain lines, not bar redraws; a resumed run's bar starts at its count."""

from __future__ import annotations

import io

from test_search_workload import SHAPE, TOPOLOGY, make_workload

from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.search.loop import Search
from cuco.search.progress import Progress, Tracker, TqdmProgress

W = make_workload()
SPACE = W.space(TOPOLOGY)
EV = ModelledEvaluator(W, SHAPE, 2)


def test_every_candidate_is_reported_as_it_finishes_with_time_left_and_best(tmp_path):
    events: list[Progress] = []
    with CandidateDB(tmp_path / "r.db") as db:
        result = Search(W, SPACE, EV, db, seed=1, batch_size=4, progress=events.append).run(12)
    done = [e for e in events if e.event == "done"]
    assert [e.evaluated for e in done] == list(range(1, 13))  # one event per candidate, not one per batch
    assert len({e.candidate for e in done}) == 12
    assert all(e.eta_s is not None and e.eta_s >= 0 for e in done) and done[-1].eta_s == 0
    generations = [e for e in events if e.event == "generation"]
    assert generations[-1].evaluated == 12 and generations[-1].best_fitness == result.best.fitness
    assert done[-1].best_fitness == result.best.fitness  # the batch's results count before its last report


def test_redirected_output_gets_one_line_per_candidate_and_no_bar_redraws(tmp_path, capsys):
    with CandidateDB(tmp_path / "r.db") as db:
        Search(W, SPACE, EV, db, seed=1, batch_size=4, progress="auto").run(8)  # stderr is captured: no TTY
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert sum("cuco search" in ln and "evaluated; best" in ln for ln in lines) == 8
    assert lines[-1].startswith("gen ") and "8/8 evaluated" in lines[-1]


def test_unit_tracker_time_left_is_the_rate_so_far_times_what_remains():
    now = [100.0]
    seen: list[Progress] = []
    tracker = Tracker(seen.append, total=10, evaluated=4, clock=lambda: now[0])  # a resumed run: 4 done before
    batch = [Candidate(code="// one", workload=W.name, id="c0"), Candidate(code="// two", workload=W.name, id="c1")]
    tracker.begin(batch, generation=3, phase="explore", best=None)
    tracker.stage("c0", "compile")
    assert seen[-1].stages == (("compile", 1), ("queued", 1)) and seen[-1].eta_s is None
    now[0] = 130.0
    tracker.stage("c0", "done")
    assert seen[-1].evaluated == 5 and seen[-1].eta_s == 30.0 * 5  # 30 s for one candidate, five to go
    tracker.stage("c0", "done")  # reported twice: counted once
    assert seen[-1].evaluated == 5


def test_unit_a_resumed_runs_bar_starts_at_its_count():
    from tqdm import tqdm

    out = io.StringIO()
    bar = TqdmProgress(tqdm, file=out, mininterval=0)
    bar(Progress(8, 12, 2, "exploit", 1.5, "lsa/x", event="stage", candidate="c", stages=(("compile", 2),)))
    bar(Progress(9, 12, 2, "exploit", 1.5, "lsa/x", event="done", candidate="c", stages=(("compile", 1),)))
    bar.close()
    text = out.getvalue()
    assert " 9/12 " in text and "compile 1" in text and "best 1.5 lsa/x" in text
    assert bar._bar.n - bar._bar.initial == 1  # the rate counts this process's candidates only


def test_a_process_that_only_imported_ipykernel_still_gets_plain_lines(monkeypatch):
    """A test runner that ran a notebook has ipykernel imported but draws to a pipe: no bar redraws there."""
    import sys
    import types

    from cuco.search.progress import make_progress

    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))  # unit-test stand-in: imported only
    reporter = make_progress("auto")
    assert not isinstance(reporter, TqdmProgress), reporter
