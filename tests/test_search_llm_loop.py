"""The loop with an LLM mutator (litellm mock responses): record a run, replay it offline bit for bit; a budget
cap stops LLM calls and the run finishes offline."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from test_search_workload import SHAPE, TOPOLOGY, make_workload, render

from cuco.db import CandidateDB
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.llm import LLMClient, LLMConfig
from cuco.search import blocks as blk
from cuco.search.loop import Mutators, Search
from cuco.search.mutators.llm import LLMMutator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before the import: no price-list download
litellm = pytest.importorskip("litellm")

W = make_workload()
SPACE = W.space(TOPOLOGY)
POINTS = list(SPACE.points())
EV = ModelledEvaluator(W, SHAPE, 2)


def model_reply(**kw):
    """A deterministic 'model': picks a point from the prompt's hash, answers directive-first with its blocks."""
    text = json.dumps(kw["messages"], sort_keys=True)
    point = POINTS[int(hashlib.sha256(text.encode()).hexdigest(), 16) % len(POINTS)]
    body = "".join(blk.split(render(point)).blocks)
    reply = (f"DIRECTIVES: {point.to_json()}\n```cuda\n// EVOLVE-BLOCK-START\n{body}// EVOLVE-BLOCK-END\n```")
    if "SEARCH/REPLACE" in text and "Task\nPropose" in text:
        first = blk.split(kw["messages"][1]["content"].split("```cuda\n", 1)[1]).blocks[0].splitlines()[0]
        reply = f"DIRECTIVES: {point.to_json()}\n<<<<<<< SEARCH\n{first}\n=======\n{first}  // tuned\n>>>>>>> REPLACE"
    return litellm.completion(mock_response=reply, **kw)


def search(db, client):
    return Search(W, SPACE, EV, db, seed=2, islands=2, batch_size=2, max_in_flight=4,
                  mutators=Mutators(llm=LLMMutator(client)))


def test_record_then_replay_offline_gives_the_same_run(tmp_path):
    cache = str(tmp_path / "llm.jsonl")
    rec = LLMClient(LLMConfig(models="openai/gpt-4o-mini", cache_mode="record", cache_path=cache), completion_fn=model_reply)
    with CandidateDB(tmp_path / "a.db") as db:
        r1 = search(db, rec).run(16)
        first = [(c.code, c.mutation, c.fitness, c.llm_cost_usd) for c in db.all()]
    muts = {m for _, m, _, _ in first}
    assert muts & {"llm_diff", "llm_full", "llm_cross"}, muts
    assert 0 < r1.llm_cost_usd <= rec.spent_usd + 1e-12  # the client also paid for meta-summaries

    def no_network(**kw):
        raise AssertionError("replay must not call the model")

    rep = LLMClient(LLMConfig(models="openai/gpt-4o-mini", cache_mode="replay", cache_path=cache), completion_fn=no_network)
    with CandidateDB(tmp_path / "b.db") as db:
        search(db, rep).run(16)
        second = [(c.code, c.mutation, c.fitness, c.llm_cost_usd) for c in db.all()]
    assert second == first


def test_budget_cap_turns_the_run_offline_and_is_never_exceeded(tmp_path):
    # litellm's mock usage is 10 prompt + 20 completion tokens: priced so that about ten calls fit the cap
    client = LLMClient(LLMConfig(models="openai/gpt-4o-mini", budget_usd=0.3, max_tokens=100,
                                 prices={"openai/gpt-4o-mini": (1e-6, 1e-3)}), completion_fn=model_reply)
    with CandidateDB(tmp_path / "c.db") as db:
        r = search(db, client).run(24)
        assert r.evaluated == 24 and 0 < client.spent_usd <= 0.3  # in-flight reservations count too
        late = [c.mutation for c in db.all()][-6:]
        assert all(m.startswith("directive") for m in late), late
        assert any(h.ops.get("budget_fallback") for h in r.history)
