"""Bad LLM input to the search: an unknown model, a missing API key or an unpriced model under a cap is refused
before anything is written; empty replies, provider errors and configuration errors met mid-run never stop the
run, which finishes with the directive mutator and says why in its notes."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from test_search_workload import SHAPE, TOPOLOGY, make_workload

from cuco.db import CandidateDB
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.llm import LLMClient, LLMConfig, LLMConfigError
from cuco.search import api
from cuco.search.loop import Mutators, Search
from cuco.search.mutators.llm import LLMMutator
from cuco.search.run_state import RunState

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before the import: no price-list download
litellm = pytest.importorskip("litellm")

W = make_workload()
SPACE = W.space(TOPOLOGY)
EV = ModelledEvaluator(W, SHAPE, 2)
MODEL = "openai/gpt-4o-mini"
PRICED = {"models": MODEL, "backoff_s": 0.0, "prices": {MODEL: (1e-7, 1e-6)}}


def search(db, client, **kw):
    return Search(W, SPACE, EV, db, seed=1, islands=2, batch_size=2, max_in_flight=4,
                  mutators=Mutators(llm=LLMMutator(client)), **kw)


def empty_reply(**_kw):
    usage = SimpleNamespace(prompt_tokens=10, completion_tokens=0)
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=""))], usage=usage)


def test_unknown_model_is_refused_before_the_run_writes_anything(tmp_path):
    with pytest.raises(LLMConfigError, match="unknown model 'no-such-model-xyz'.*provider/model"):
        api.start(tmp_path / "run", W, EV, space=SPACE, llm=LLMConfig(models="no-such-model-xyz"))
    assert not (tmp_path / "run" / api.DB_FILE).exists()


def test_missing_api_key_is_refused_at_start(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        api.start(tmp_path / "run", W, EV, space=SPACE, llm=LLMConfig(models=MODEL))
    assert not (tmp_path / "run" / api.DB_FILE).exists()
    with CandidateDB(tmp_path / "direct.db") as db, pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        search(db, LLMClient(LLMConfig(models=MODEL)))
    with CandidateDB(tmp_path / "direct.db") as db:
        assert len(db) == 0


def test_unpriced_model_under_a_budget_cap_is_refused_at_start(tmp_path):
    client = LLMClient(LLMConfig(models="openai/house-finetune-xyz", budget_usd=1.0), completion_fn=empty_reply)
    with CandidateDB(tmp_path / "a.db") as db, pytest.raises(LLMConfigError, match="no price.*prices="):
        search(db, client)


def test_replay_mode_needs_no_key_or_price(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cache = tmp_path / "llm.jsonl"
    cache.write_text("")
    LLMClient(LLMConfig(models=MODEL, budget_usd=1.0, cache_mode="replay", cache_path=str(cache))).check()


def test_empty_replies_for_a_whole_run_finish_offline_with_a_clear_note(tmp_path):
    client = LLMClient(LLMConfig(**PRICED), completion_fn=empty_reply)
    with CandidateDB(tmp_path / "e.db") as db:
        with pytest.warns(RuntimeWarning, match="nothing usable"):
            r = search(db, client).run(16)
        assert r.evaluated == 16 and r.counts == {"unmeasured": 16}
        assert all(c.mutation in ("seed", "directive", "directive_cross") for c in db.all())
    assert r.notes and "nothing usable in 14 proposal(s)" in r.notes[0] and "reply is empty" in r.notes[0]
    assert client.calls > 14  # each proposal retried with the error shown, then tried as a rewrite


def test_provider_errors_never_stop_the_run(tmp_path):
    calls = []

    def failing(**kw):
        calls.append(kw)
        raise litellm.InternalServerError(message="upstream overloaded", llm_provider="openai", model="gpt-4o-mini")

    client = LLMClient(LLMConfig(**PRICED, max_retries=1), completion_fn=failing)
    with CandidateDB(tmp_path / "p.db") as db:
        with pytest.warns(RuntimeWarning, match="InternalServerError"):
            r = search(db, client).run(12)
        assert r.evaluated == 12 and r.counts == {"unmeasured": 12}
    assert calls and "upstream overloaded" in r.notes[0]
    assert client.spent_usd == 0.0  # failed calls are not charged


class _RevokedKey:
    """A client whose key is revoked after the run started: every call is a configuration error."""

    completion_kwargs: dict = {}

    def __init__(self):
        self.calls = 0

    def complete(self, *_a, **_kw):
        self.calls += 1
        raise LLMConfigError("model 'openai/gpt-4o-mini' needs OPENAI_API_KEY in the environment")


def test_a_configuration_error_mid_run_switches_the_llm_off(tmp_path):
    client = _RevokedKey()
    with CandidateDB(tmp_path / "k.db") as db:
        r = search(db, client).run(14)
        assert r.evaluated == 14
        state = RunState.load(db)
        assert state.llm_disabled and "OPENAI_API_KEY" in state.llm_note
        late = [c.mutation for c in db.all()][-6:]
        assert all(m.startswith("directive") for m in late), late
    assert client.calls <= 4  # only the proposals already in flight asked; none after the switch-off
    assert r.notes[0].startswith("LLM mutations were switched off") and "OPENAI_API_KEY" in r.notes[0]


def test_every_failed_reply_is_costed_in_the_runs_spend(tmp_path):
    """Replies that become no candidate still cost money: the result reports the run's ledger, not only the
    candidates' costs (reliability, part 2, defect 2)."""
    from cuco.spend import LEDGER_FILE, SpendLedger

    client = LLMClient(LLMConfig(**PRICED), completion_fn=empty_reply, ledger=SpendLedger(tmp_path / LEDGER_FILE))
    with CandidateDB(tmp_path / "e.db") as db:
        r = search(db, client).run(8)
        assert sum(c.llm_cost_usd for c in db.all()) == 0.0  # no reply became a candidate
    assert client.calls > 0 and r.llm_cost_usd == pytest.approx(client.calls * 10 * 1e-7)
