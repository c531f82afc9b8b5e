"""FastPathAgent leaves no build directory behind in the temp dir (on success or error), and a program in
candidate-ABI form is reported as such on a one-GPU machine too."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cuco.fastpath import verify
from cuco.fastpath.agent import FastPathAgent
from cuco.fastpath.model import FastPathError

FIX = Path(__file__).parent / "fixtures" / "fastpath"


@pytest.fixture
def temp_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_no_build_directory_is_left_in_the_temp_dir(temp_dir):
    result = FastPathAgent(check_input=False, run_on_gpu=False).run(FIX / "ring_threads.cu")
    assert result.verified_how == "compiled only (no GPU)"
    with pytest.raises(FastPathError):
        FastPathAgent(check_input=True, run_on_gpu=False).run(FIX / "bad_does_not_compile.cu")
    assert list(temp_dir.iterdir()) == []


def test_a_candidate_abi_program_on_one_gpu_is_left_to_the_harness(temp_dir, monkeypatch):
    monkeypatch.setattr(verify, "gpu_count", lambda: 1)  # a one-GPU machine, as the agent sees it
    result = FastPathAgent(check_input=False).run(FIX / "abi_allgather_seed.cu")
    assert result.verified_how.startswith("compiled only (candidate ABI"), result.verified_how
