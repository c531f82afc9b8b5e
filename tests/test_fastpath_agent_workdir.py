"""FastPathAgent leaves no build directory behind in the temp dir (on success or error), and a program in
candidate-ABI form is reported as such on a one-GPU machine too."""

from __future__ import annotations

import logging
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


def test_the_agent_says_what_it_compiles_while_it_compiles(temp_dir, caplog, tmp_path, monkeypatch):
    """By default through the "cuco.fastpath" logger: each nvcc build announced, a heartbeat while it runs."""
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))  # both builds compile, none comes from a cache
    with caplog.at_level(logging.INFO, logger="cuco.fastpath"):
        FastPathAgent(check_input=True, run_on_gpu=False, heartbeat_s=0.2).run(FIX / "ring_threads.cu")
    said = [r.getMessage() for r in caplog.records if r.name == "cuco.fastpath"]
    assert said[0].startswith("fast path: ") and "collective" in said[0]
    for what in ("compiling the original program (nvcc)", "compiling the device-initiated program (nvcc)"):
        start = said.index(f"fast path: {what} ...")
        end = next(i for i, m in enumerate(said) if m.startswith(f"fast path: {what}: done in "))
        assert any(m.endswith("s so far") for m in said[start:end]), said  # nvcc takes longer than 0.2 s
