"""`cuco run --resume --model M` without --budget-usd keeps the run's cap, not the $5 default: through the CLI,
on a run that already spent its cap, no provider call is even reserved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuco.spend import LEDGER_FILE, SpendLedger

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
CAP = 0.05


def _cuco(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # no GPU, and a provider address where nothing listens: a call that is made fails, and is costed
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OPENAI_API_KEY": "sk-test-not-a-key",
           "OPENAI_API_BASE": "http://127.0.0.1:9/v1", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "cuco.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=900)


def test_a_resume_without_budget_keeps_the_runs_cap(tmp_path):
    pytest.importorskip("litellm")
    run = tmp_path / "r"
    program = str(CORPUS / "rs_grad_shard.cu")
    res = _cuco("run", program, "--evals", "1", "--budget-usd", str(CAP), "--run-dir", str(run), "--quiet",
                cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((run / "manifest.json").read_text())["budget_usd"] == CAP
    ledger = SpendLedger(run / LEDGER_FILE)
    ledger.settle(ledger.reserve(CAP, "openai/gpt-4o-mini"), CAP)   # an earlier process spent the whole cap
    before = (run / LEDGER_FILE).read_text()

    # 6: past the seeds of the first generation, so the search proposes LLM mutations
    res = _cuco("run", program, "--evals", "6", "--run-dir", str(run), "--resume", "--model", "openai/gpt-4o-mini",
                "--price-per-mtok", "0.15,0.6", "--quiet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (run / LEDGER_FILE).read_text() == before, "a call was reserved past the run's cap"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["evaluated"] == 6
    assert json.loads((run / "manifest.json").read_text())["budget_usd"] == CAP


def test_unit_a_resume_of_a_run_whose_cap_was_not_recorded_asks_for_one():
    from cuco.errors import CucoError
    from cuco.run_options import RunOptions
    from cuco.run_options import run_budget as _budget

    class Stored:  # a manifest written before the cap was kept
        budget_usd = None

    assert _budget(RunOptions("w", budget_usd=None), None) == 5.0
    assert _budget(RunOptions("w", budget_usd=1.5), Stored()) == 1.5
    assert _budget(RunOptions("w"), Stored()) == 5.0          # no model: no cap to keep
    with pytest.raises(CucoError, match="--budget-usd"):
        _budget(RunOptions("w", model="openai/gpt-4o-mini"), Stored())
