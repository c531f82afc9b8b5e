"""LLMClient over litellm with mock_response and raised litellm exceptions: no network is used."""

from __future__ import annotations

import os
import threading
import time

import pytest

from cuco.llm import (LLMBudgetError, LLMClient, LLMConfig, LLMConfigError, LLMError, LLMTimeoutError, ReplayCache,
                      ReplayMissError)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before the import: no price-list download
litellm = pytest.importorskip("litellm")

MSG = [{"role": "user", "content": "write a kernel"}]
MODEL = "openai/gpt-4o-mini"


def client(**kw) -> LLMClient:
    kw.setdefault("models", MODEL)
    kw.setdefault("backoff_s", 0.0)
    return LLMClient(LLMConfig(**kw))


def test_mock_completion_reports_text_model_and_cost():
    r = client().complete(MSG, 0.2, mock_response="DIRECTIVES: {}")
    assert r.text == "DIRECTIVES: {}" and r.model == MODEL and not r.cached
    assert r.cost_usd > 0  # litellm.completion_cost of the mock usage at gpt-4o-mini prices


def test_weighted_models_follow_the_rng():
    import random
    c = client(models={"openai/gpt-4o-mini": 1, "openai/gpt-4o": 3})
    picks = [c.choose_model(random.Random(i)) for i in range(400)]
    assert 0.65 < picks.count("openai/gpt-4o") / 400 < 0.85


def test_unknown_model_is_a_clear_error():
    with pytest.raises(LLMConfigError, match="provider/model"):
        client(models="no-such-model-xyz").complete(MSG, mock_response="x")


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        client().complete(MSG)  # checked before any request is sent


def test_empty_model_list_is_rejected():
    with pytest.raises(LLMConfigError):
        LLMConfig(models=[])


def _raiser(exc_cls, calls):
    def fn(**kw):
        calls.append(kw)
        raise exc_cls(message="boom", llm_provider="openai", model="gpt-4o-mini")
    return fn


def test_retryable_errors_are_retried_then_reported():
    calls: list = []
    c = LLMClient(LLMConfig(models=MODEL, max_retries=2, backoff_s=0.0),
                  completion_fn=_raiser(litellm.exceptions.RateLimitError, calls))
    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        c.complete(MSG)
    assert len(calls) == 3
    assert c.spent_usd == 0 and c.remaining_usd() is None


def test_authentication_error_is_not_retried():
    calls: list = []
    c = LLMClient(LLMConfig(models=MODEL, max_retries=3, backoff_s=0.0),
                  completion_fn=_raiser(litellm.exceptions.AuthenticationError, calls))
    with pytest.raises(LLMError, match="API key"):
        c.complete(MSG)
    assert len(calls) == 1


def test_retry_then_success_with_backoff():
    calls: list = []
    slept: list = []

    def flaky(**kw):
        calls.append(1)
        if len(calls) < 2:
            raise litellm.exceptions.ServiceUnavailableError(message="busy", llm_provider="openai", model="gpt-4o-mini")
        return litellm.completion(mock_response="ok", **kw)

    c = LLMClient(LLMConfig(models=MODEL, max_retries=2, backoff_s=0.5), completion_fn=flaky, sleep=slept.append)
    assert c.complete(MSG).text == "ok"
    assert slept == [0.5]


def test_budget_cap_is_never_exceeded():
    c = client(budget_usd=0.02, max_tokens=1000)
    worst = c.worst_case_usd(litellm, MODEL, MSG)
    made = 0
    with pytest.raises(LLMBudgetError, match="budget cap"):
        for _ in range(10_000):
            c.complete(MSG, mock_response="x" * 50)
            made += 1
            assert c.spent_usd <= 0.02
    assert made >= 1
    assert c.spent_usd + worst > 0.02  # refused only when the next call could have crossed the cap
    assert c.spent_usd <= 0.02


def _hammer(c: LLMClient, threads: int = 6, calls: int = 50) -> list:
    errors: list = []

    def work():
        for _ in range(calls):
            try:
                c.complete(MSG, mock_response="y")
            except LLMBudgetError:
                errors.append(1)
                return

    pool = [threading.Thread(target=work) for _ in range(threads)]
    [t.start() for t in pool]
    [t.join() for t in pool]
    return errors


def test_budget_cap_holds_under_concurrent_calls():
    one = client(max_tokens=20).complete(MSG, mock_response="y").cost_usd
    c = client(budget_usd=20 * one, max_tokens=20)
    errors = _hammer(c)
    assert errors and c.spent_usd <= 20 * one


def test_calls_in_flight_do_not_switch_the_llm_off_before_money_is_spent():
    """Six concurrent worst cases exceed the cap, yet each call costs little: nobody is refused until the
    money spent reaches the cap."""
    one = client(max_tokens=2000).complete(MSG, mock_response="y").cost_usd
    worst = client(max_tokens=2000).worst_case_usd(__import__("cuco.llm").llm.import_litellm(), MODEL, MSG)
    cap = 3 * worst  # room for three calls in flight at their worst case, not six
    c = client(budget_usd=cap, max_tokens=2000)
    errors = _hammer(c, threads=6, calls=5)
    assert not errors and c.spent_usd == pytest.approx(30 * one)


def test_unpriced_model_with_a_budget_needs_prices():
    c = LLMClient(LLMConfig(models="openai/my-finetune-xyz", budget_usd=1.0), completion_fn=lambda **kw: None)
    with pytest.raises(LLMConfigError, match="prices"):
        c.complete(MSG)


def test_outer_timeout_abandons_a_hung_call_and_charges_its_worst_case():
    def hang(**kw):
        time.sleep(5)

    c = LLMClient(LLMConfig(models=MODEL, outer_timeout_s=0.2, max_retries=3, budget_usd=1.0), completion_fn=hang)
    t0 = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="outer timeout"):
        c.complete(MSG)
    assert time.monotonic() - t0 < 2.0  # not retried, not waited for
    assert c.spent_usd == pytest.approx(c.worst_case_usd(litellm, MODEL, MSG))


def test_record_then_replay_bit_for_bit(tmp_path):
    path = tmp_path / "cache.jsonl"
    rec = client(cache_mode="record", cache_path=str(path))
    a = rec.complete(MSG, 0.5, key_extra="0:0", mock_response="first")
    b = rec.complete(MSG, 0.5, key_extra="0:0", mock_response="second")  # same prompt twice: both kept, in order
    rep = client(cache_mode="replay", cache_path=str(path))
    ra, rb = rep.complete(MSG, 0.5, key_extra="0:0"), rep.complete(MSG, 0.5, key_extra="0:0")
    assert (ra.text, rb.text) == (a.text, b.text) == ("first", "second")
    assert ra.cached and ra.cost_usd == a.cost_usd and rep.spent_usd == pytest.approx(rec.spent_usd)
    with pytest.raises(ReplayMissError, match="no answer"):
        rep.complete(MSG, 0.5, key_extra="0:0")
    with pytest.raises(ReplayMissError):
        rep.complete([{"role": "user", "content": "another"}], 0.5)


def test_replay_cache_survives_a_torn_last_line(tmp_path):
    path = tmp_path / "c.jsonl"
    c = client(cache_mode="record", cache_path=str(path))
    c.complete(MSG, 0.0, mock_response="kept")
    with open(path, "a") as f:
        f.write('{"key": "abc", "text": "cut sh')
    assert len(ReplayCache(path)) == 1


def test_replay_without_a_cache_file_is_a_clear_error(tmp_path):
    with pytest.raises(LLMConfigError, match="record a run first"):
        client(cache_mode="replay", cache_path=str(tmp_path / "missing.jsonl"))


def test_import_cuco_llm_does_not_import_litellm():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, cuco.llm, cuco.search.loop, cuco.search.api; "
                          "print('litellm' in sys.modules)"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
