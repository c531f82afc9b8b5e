"""The LLM is switched off when it cannot work and never before; replies are bounded; keys never come back in
errors; configuration problems are said before a run starts (reliability, part 2: defects 3, 4, 6)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cuco.llm import LLMClient, LLMConfig, LLMConfigError, LLMError, LLMTimeoutError
from cuco.redact import REDACTED, redact

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

MSG = [{"role": "user", "content": "write a kernel"}]
MODEL = "openai/gpt-4o-mini"


class AuthenticationError(Exception):
    """Named as litellm's exception is (the client classifies provider errors by class name)."""


def test_a_rejected_key_switches_the_llm_off_instead_of_being_retried(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    calls = []

    def refuse(**kw):
        calls.append(1)
        raise AuthenticationError("Incorrect API key provided: sk-test-0123456789abcdefghij")

    c = LLMClient(LLMConfig(models=MODEL, max_retries=3, backoff_s=0.0), completion_fn=refuse)
    with pytest.raises(LLMConfigError) as info:
        c.complete(MSG)
    assert len(calls) == 1
    assert "sk-test-0123456789" not in str(info.value) and REDACTED in str(info.value)


def test_an_oversized_reply_is_refused_and_not_returned():
    c = LLMClient(LLMConfig(models=MODEL, max_reply_chars=1000, backoff_s=0.0, max_retries=0))
    with pytest.raises(LLMError, match="over max_reply_chars"):
        c.complete(MSG, mock_response="x" * 5000)


def test_a_hung_provider_is_not_asked_again_once_calls_pile_up():
    def hang(**kw):
        time.sleep(3)

    c = LLMClient(LLMConfig(models=MODEL, outer_timeout_s=0.1, max_retries=0, max_abandoned_calls=2),
                  completion_fn=hang)
    for _ in range(2):
        with pytest.raises(LLMTimeoutError):
            c.complete(MSG)
    start = time.monotonic()
    with pytest.raises(LLMConfigError, match="still hanging"):
        c.complete(MSG)
    assert time.monotonic() - start < 0.1  # refused at once, no third thread


def test_redaction_of_secret_values_and_key_shapes():
    env = {"WATSONX_APIKEY": "wx-0123456789", "PATH": "/usr/bin", "LANG": "C.UTF-8"}
    text = "bad key wx-0123456789; also AKIAABCDEFGHIJKLMNOP and Bearer abcdefghijklmnopqrstuv in C.UTF-8"
    out = redact(text, env)
    assert "wx-0123456789" not in out and "AKIAABCDEFGHIJKLMNOP" not in out and "abcdefghijklmnopqrstuv" not in out
    assert "C.UTF-8" in out  # values of variables a candidate may see are not secrets


def test_cli_says_a_missing_price_before_anything_is_written(tmp_path):
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "CUDA_VISIBLE_DEVICES": ""}
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "cuco.cli", "run", "gemm_allgather", "--world", "1", "--quiet",
                          "--model", "openai/my-finetune-xyz", "--run-dir", str(run_dir)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-1500:]
    assert "--price-per-mtok" in out.stderr
    assert not run_dir.exists()


def test_cli_rejects_a_malformed_price():
    out = subprocess.run([sys.executable, "-m", "cuco.cli", "run", "gemm_allgather", "--price-per-mtok", "cheap"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "two prices" in out.stderr
