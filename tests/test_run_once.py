"""A run builds its database, its lock and its LLM check once and hands them down: the search, the fast path and
the summary use the run's own. Unit tests: the openings are counted by stand-ins wrapped around CandidateDB's
constructor, the lock's acquire and the LLM client's model check (each still does its real work)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuco import runlock
from cuco.db import CandidateDB
from cuco.llm import LLMClient
from cuco.run import Run
from cuco.run_options import RunOptions

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Stand-ins that count, then call the real thing: database openings, lock takings, model checks."""
    seen = {"db": 0, "lock": 0, "llm check": 0}

    def counting(key: str, real):  # noqa: ANN001, ANN202
        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            seen[key] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(CandidateDB, "__init__", counting("db", CandidateDB.__init__))
    monkeypatch.setattr(runlock, "acquire", counting("lock", runlock.acquire))
    monkeypatch.setattr(LLMClient, "_check_model", counting("llm check", LLMClient._check_model))
    # no GPU: the run checks and compiles only; a key and prices so that the model check passes offline
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return seen


def _open_and_summarize(run_dir: Path, resume: bool) -> Run:
    opts = RunOptions("gemm_allgather", run_dir=str(run_dir), resume=resume, evaluations=1, model=MODEL,
                      price_per_mtok=(0.15, 0.6), progress=False)
    with Run.open(opts, on_event=lambda _msg: None) as run:
        run.summary()
        return run


def test_unit_a_new_run_opens_its_database_takes_its_lock_and_checks_its_model_once(tmp_path, counts):
    pytest.importorskip("litellm")
    run = _open_and_summarize(tmp_path / "r", resume=False)
    assert counts == {"db": 1, "lock": 1, "llm check": 1}
    assert run.search_loop.db is run.db and run.search_loop.take_lock is False  # the search takes neither again


def test_unit_a_resumed_run_opens_its_database_takes_its_lock_and_checks_its_model_once(tmp_path, counts):
    pytest.importorskip("litellm")
    _open_and_summarize(tmp_path / "r", resume=False)
    counts.update({"db": 0, "lock": 0, "llm check": 0})
    _open_and_summarize(tmp_path / "r", resume=True)
    # the database twice: a read-only look before any check (a broken or foreign file is named and left
    # untouched, tests/test_cli.py), then the run's own connection once the lock is held
    assert counts == {"db": 2, "lock": 1, "llm check": 1}
