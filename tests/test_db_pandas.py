"""CandidateDB.to_pandas(): a run as a DataFrame, one row per candidate; without pandas, a clear error."""

from __future__ import annotations

import sys

import pytest
from test_search_workload import SHAPE, TOPOLOGY, make_workload

from cuco.db import CandidateDB
from cuco.errors import CucoError
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.frame import COLUMNS
from cuco.search.loop import Search

W = make_workload()


def test_a_run_as_a_dataframe(tmp_path):
    pd = pytest.importorskip("pandas")
    with CandidateDB(tmp_path / "r.db") as db:
        Search(W, W.space(TOPOLOGY), ModelledEvaluator(W, SHAPE, 2), db, seed=1, batch_size=4).run(12)
        df = db.to_pandas()
        every, best = db.all(), db.best()
        assert db.to_pandas("another workload").empty
    assert isinstance(df, pd.DataFrame) and len(df) == 12
    assert list(df.columns[:len(COLUMNS)]) == list(COLUMNS) and "code" not in df.columns
    assert list(df["id"]) == [c.id for c in every]  # insertion order
    assert {"backend", "placement", "time_ms", "speedup", "static_s", "bench_s"} <= set(df.columns)
    assert df["fitness"].max() == best.fitness and df.loc[df["fitness"].idxmax(), "point"] == best.directives.label()
    assert set(df["status"]) == {"unmeasured"} and str(df["created_at"].dt.tz) == "UTC"
    with CandidateDB(tmp_path / "r.db", readonly=True) as db:
        assert db.to_pandas(code=True)["code"].tolist() == [c.code for c in every]


def test_unit_without_pandas_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # what an environment without pandas gives: ImportError
    with CandidateDB(tmp_path / "r.db") as db:
        with pytest.raises(CucoError, match="pip install pandas"):
            db.to_pandas()
