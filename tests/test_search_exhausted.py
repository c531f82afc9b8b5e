"""An offline search (no LLM) on a small design space evaluates each legal point once and stops when none is left:
fewer evaluations than asked, said in the result, the stored run state, the progress reports and `cuco run`'s
summary; a resume of such a run ends at once. With an LLM on, or a space too large to enumerate, it goes on."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_search_workload import SHAPE, TOPOLOGY, make_workload

from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.design_space import MiB, Topology
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.search import api
from cuco.search.island import IslandSpec
from cuco.search.loop import Search
from cuco.search.progress import Progress, TqdmProgress
from cuco.search.run_state import RunState

W = make_workload()
EV = ModelledEvaluator(W, SHAPE, 2)
#: Six legal points, like the user's programs whose runs asked for eight: two placements x three issuers.
SIX = W.space(TOPOLOGY).restrict(placements=("deferred", "stream_overlap"), sync_scopes=("world",), chunk_sizes=(0,))
SIX_LABELS = {p.label() for p in SIX.points()}
EVERY_BACKEND = Topology(world=2, nodes=1, gin_available=True, nvshmem_available=True)


def _labels(db: CandidateDB) -> list[str]:
    return [c.directives.label() for c in db.all() if c.status != "pending"]


def _fastpath(space):
    point = space.conservative()
    return Candidate(code=W.render(point, space.topology), workload=W.name, directives=point, mutation="fastpath")


def test_the_space_has_six_legal_points():
    assert SIX.size() == 6 == len(SIX_LABELS)


def test_asked_for_more_than_the_space_holds_it_evaluates_each_point_once_and_says_so(tmp_path):
    events: list[Progress] = []
    with CandidateDB(tmp_path / "r.db") as db:
        db.add(EV.evaluate([_fastpath(SIX)])[0])  # as `cuco run` stores the fast path's candidate before the search
        result = Search(W, SIX, EV, db, seed=3, islands=4, batch_size=4, progress=events.append).run(8)
        labels = _labels(db)
        assert sorted(labels) == sorted(SIX_LABELS)  # every point once, none twice
        assert result.evaluated == 6 and len(db) == 6
        assert result.exhausted and result.asked == 8
        assert "stopped after 6 of the 8 evaluations asked" in result.notes[-1]
        state = RunState.load(db)
        assert state.exhausted and state.total == 8
    assert events[-1].event == "exhausted" and events[-1].evaluated == events[-1].total == 6
    assert "6 of the 8" in events[-1].note


def test_a_resume_of_an_exhausted_run_asking_for_more_ends_at_once_saying_the_same(tmp_path, capsys):
    first = api.start(tmp_path / "run", W, EV, space=SIX, seed=1, islands=2, batch_size=2).run(7)
    assert first.evaluated == 6 and first.exhausted
    with CandidateDB(tmp_path / "run" / api.DB_FILE) as db:
        before = [(c.id, c.status) for c in db.all()]
    again = api.resume(tmp_path / "run", W, EV, progress="plain").run(20)
    assert again.evaluated == 6 and again.exhausted and again.asked == 20
    assert "stopped after 6 of the 20 evaluations asked" in again.notes[-1]
    assert capsys.readouterr().err.strip().endswith("stopped after 6 of the 20 evaluations asked "
                                                    "(without an LLM nothing new is left to try)")
    with CandidateDB(tmp_path / "run" / api.DB_FILE) as db:
        assert [(c.id, c.status) for c in db.all()] == before  # nothing proposed, nothing evaluated again


def test_asked_for_exactly_the_space_it_is_not_reported_as_stopped_short(tmp_path):
    with CandidateDB(tmp_path / "r.db") as db:
        result = Search(W, SIX, EV, db, seed=2, islands=3, batch_size=4).run(6)
        assert result.evaluated == 6 and not result.exhausted and not result.notes
        assert sorted(_labels(db)) == sorted(SIX_LABELS)


def test_islands_of_their_own_backend_cover_only_their_spaces(tmp_path):
    space = W.space(EVERY_BACKEND).restrict(placements=("deferred",), sync_scopes=("world",), issuers=("cta",),
                                            chunk_sizes=(0, 4 * MiB))
    own = {p.label() for b in ("lsa", "gin") for p in space.restrict(backends=(b,)).points()}
    assert own < {p.label() for p in space.points()}  # nvshmem's points belong to no island
    specs = (IslandSpec("lsa"), IslandSpec("gin"), IslandSpec("lsa"))
    with CandidateDB(tmp_path / "r.db") as db:
        result = Search(W, space, EV, db, seed=5, islands=3, island_specs=specs, batch_size=3).run(len(own) + 4)
        assert sorted(_labels(db)) == sorted(own) and result.exhausted


def test_with_an_llm_on_the_run_goes_on_past_the_points(tmp_path):
    pytest.importorskip("litellm")
    from cuco.llm import LLMClient, LLMConfig
    from cuco.search.loop import Mutators
    from cuco.search.mutators.llm import LLMMutator

    import test_search_llm_loop as llm_loop

    client = LLMClient(LLMConfig(models="openai/gpt-4o-mini"), completion_fn=llm_loop.model_reply)
    with CandidateDB(tmp_path / "r.db") as db:
        result = Search(W, SIX, EV, db, seed=2, islands=2, batch_size=2, max_in_flight=4,
                        mutators=Mutators(llm=LLMMutator(client))).run(9)
        assert result.evaluated == 9 and not result.exhausted  # an LLM may write new code at a seen point


def test_a_space_too_large_to_enumerate_keeps_going(tmp_path, monkeypatch):
    from cuco.search import coverage

    assert coverage.legal_labels(SIX) == frozenset(SIX_LABELS)
    monkeypatch.setattr(coverage, "MAX_COMBINATIONS", 5)
    assert coverage.legal_labels(SIX) is None
    with CandidateDB(tmp_path / "r.db") as db:
        result = Search(W, SIX, EV, db, seed=2, islands=2, batch_size=2).run(8)
        assert result.evaluated == 8 and not result.exhausted


def test_unit_a_bar_of_a_run_that_stopped_short_ends_full():
    from tqdm import tqdm

    out = io.StringIO()
    bar = TqdmProgress(tqdm, file=out, mininterval=0)
    bar(Progress(5, 8, 2, "explore", 1.5, "lsa/x", event="done", candidate="c"))
    bar(Progress(6, 6, 2, "explore", 1.5, "lsa/x", event="exhausted", note="every legal point ..."))
    bar.close()
    assert bar._bar.n == bar._bar.total == 6 and "6/6" in out.getvalue()


def test_cuco_runs_summary_and_messages_say_the_space_was_exhausted(tmp_path):
    from cuco.run import Run, RunOptions

    said: list[str] = []
    run = Run(RunOptions(W.name, run_dir=str(tmp_path)), said.append)
    with CandidateDB(tmp_path / api.DB_FILE) as db:
        run.db, run.workload, run.run_dir, run.evaluation, run.evaluations = db, W, tmp_path, "unmeasured", 9
        run.search_loop = Search(W, SIX, EV, db, seed=4, islands=2, batch_size=3)
        run.search()
        summary = run.summary()
    assert said and "stopped after 6 of the 9 evaluations asked" in said[-1]
    assert summary.exhausted and summary.to_dict()["exhausted"] is True
    assert "stopped after 6 of the 9" in summary.to_dict()["notes"][0] and summary.notes[0] in summary.text()


# -- the invariant, over random small spaces, island layouts and batch sizes ---------------------------------------
_CHOICES = {"backends": ("lsa", "gin", "nvshmem"), "placements": ("deferred", "split_put_wait", "stream_overlap"),
            "sync_scopes": ("world", "team", "signal"), "issuers": ("thread", "warp", "cta"),
            "chunk_sizes": (0, 16 * MiB, 4 * MiB, 1 * MiB)}


@st.composite
def _runs(draw):
    picks = {k: tuple(draw(st.lists(st.sampled_from(v), min_size=1, max_size=len(v), unique=True)))
             for k, v in _CHOICES.items()}
    space = W.space(EVERY_BACKEND).restrict(**picks)
    islands = draw(st.integers(1, 3))
    specs: tuple = ()
    if draw(st.booleans()):
        specs = tuple(IslandSpec(draw(st.sampled_from(space.backends))) for _ in range(islands))
    batch = draw(st.integers(1, 4))
    return space, islands, specs, batch, draw(st.integers(0, 2 ** 16)), draw(st.integers(-3, 4))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_runs())
def test_offline_search_never_repeats_a_point_and_stops_at_exactly_the_legal_points(run):
    space, islands, specs, batch, seed, extra = run
    own = [space.restrict(backends=(s.backend,)) if specs else space for s in (specs or (None,))]
    assume(all(next(o.points(), None) is not None for o in own))
    legal = {p.label() for o in own for p in o.points()}
    assume(len(legal) <= 40)
    asked = max(1, len(legal) + extra)
    with tempfile.TemporaryDirectory() as tmp, CandidateDB(Path(tmp) / "r.db") as db:
        result = Search(W, space, EV, db, seed=seed, islands=islands, island_specs=specs, batch_size=batch,
                        max_in_flight=max(8, batch)).run(asked)
        labels = _labels(db)
    assert len(labels) == len(set(labels)), "a point was evaluated twice"
    assert set(labels) <= legal
    assert result.evaluated == len(labels) == min(asked, len(legal))
    assert result.exhausted == (asked > len(legal))
