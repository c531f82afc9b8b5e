"""The LLM budget cap holds for a run, across processes and resumes (reliability, part 2, defect 1)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from cuco.llm import LLMBudgetError, LLMClient, LLMConfig
from cuco.spend import SpendLedger

PRICES = {"openai/gpt-4o-mini": (1e-6, 2e-6)}


def _client(ledger: SpendLedger, cap: float) -> LLMClient:
    config = LLMConfig(models="openai/gpt-4o-mini", budget_usd=cap, prices=PRICES, max_tokens=1000, max_retries=0)
    return LLMClient(config, ledger=ledger)


def _call(client: LLMClient) -> float:
    # litellm's mock_response: no network, a real litellm response object costed by the configured prices
    return client.complete([{"role": "user", "content": "x" * 400}], mock_response="ok").cost_usd


def test_spend_is_the_runs_not_the_processes(tmp_path, monkeypatch):
    pytest.importorskip("litellm")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-used")
    ledger = SpendLedger(tmp_path / "llm_spend.jsonl")
    first = _client(ledger, cap=0.01)
    spent = sum(_call(first) for _ in range(3))
    assert spent > 0
    again = _client(SpendLedger(tmp_path / "llm_spend.jsonl"), cap=0.01)  # a resume: a new client, same run
    assert again.spent_usd == pytest.approx(spent)
    tight = _client(SpendLedger(tmp_path / "llm_spend.jsonl"), cap=spent + 1e-7)
    with pytest.raises(LLMBudgetError):
        _call(tight)


def test_a_call_in_flight_at_a_kill_counts_at_its_worst_case(tmp_path):
    path = tmp_path / "llm_spend.jsonl"
    code = textwrap.dedent(f"""
        import os
        from cuco.spend import SpendLedger
        led = SpendLedger({str(path)!r})
        led.settle(led.reserve(0.25, "m"), 0.125)
        led.reserve(0.5, "m")          # the provider call is in flight ...
        os.kill(os.getpid(), 9)        # ... when the process is killed
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ}, capture_output=True)
    assert proc.returncode == -9
    assert SpendLedger(path).total_usd() == pytest.approx(0.125 + 0.5)


def test_a_cut_last_line_is_ignored_and_the_next_append_keeps_the_ledger_readable(tmp_path):
    path = tmp_path / "llm_spend.jsonl"
    led = SpendLedger(path)
    led.settle(led.reserve(1.0, "m"), 0.5)
    with path.open("a") as f:
        f.write('{"op": "reserve", "id": "ab')  # a kill in the middle of a write
    assert SpendLedger(path).total_usd() == pytest.approx(0.5)
    resumed = SpendLedger(path)                 # the resumed run's first call appends after the cut line
    resumed.settle(resumed.reserve(0.25, "m"), 0.125)
    assert SpendLedger(path).total_usd() == pytest.approx(0.625)   # and every later resume still reads it
    assert all(line.startswith('{"op"') for line in path.read_text().splitlines())


def test_a_corrupt_whole_record_is_an_error(tmp_path):
    path = tmp_path / "llm_spend.jsonl"
    led = SpendLedger(path)
    led.settle(led.reserve(1.0, "m"), 0.5)
    with path.open("a") as f:
        f.write("not json\n")
    from cuco.errors import CucoError
    with pytest.raises(CucoError, match="line 3 is not a spend record"):
        SpendLedger(path).total_usd()
