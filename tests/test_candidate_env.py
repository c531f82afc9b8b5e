"""Candidate-facing processes (nvcc, the harness) inherit an allow-listed environment, and a machine fault
in a compile is never cached as the candidate's error (reliability, part 2: defects 6 and 8)."""

from __future__ import annotations

import stat
from pathlib import Path

import attrs
import pytest

from cuco.process import SAFE_GPU_ENV, scrubbed_env


def test_only_allow_listed_variables_pass_whatever_their_names():
    base = {"WATSONX_APIKEY": "k1", "SNOWFLAKE_JWT": "k2", "MY_LLM_PROXY_AUTH": "k3", "OPENAI_API_KEY": "k4",
            "PATH": "/usr/bin", "HOME": "/root", "CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "WARN",
            "LC_ALL": "C", "RANDOM_APP_SETTING": "x"}
    env = scrubbed_env(base)
    assert set(env) == {"PATH", "HOME", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "LC_ALL", *SAFE_GPU_ENV}
    assert env["NCCL_NVLS_ENABLE"] == "0"


def _env_of_a_run(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a real command run by the executor sees (it prints it)."""
    from cuco.evaluate.executor import Executor

    outcome = Executor.run_command(["env"], None, timeout_s=30, extra_env=extra)
    assert outcome.returncode == 0, outcome.stderr
    return dict(line.split("=", 1) for line in outcome.stdout.splitlines() if "=" in line)


def test_what_the_caller_sets_reaches_the_program_through_the_executor():
    """run_command scrubs, then run_group scrubbed again and dropped WORLD_SIZE and RANK on the way."""
    env = _env_of_a_run({"WORLD_SIZE": "2", "RANK": "1", "MY_SETTING": "x", "NCCL_AUTH_TOKEN": "t"})
    assert env["WORLD_SIZE"] == "2" and env["RANK"] == "1" and env["MY_SETTING"] == "x"
    assert "NCCL_AUTH_TOKEN" not in env and env["CUDA_VISIBLE_DEVICES"] == ""


PASSWORD_NAMES = ("CUCO_PASS", "NCCL_PASSWD", "CUDA_PASSPHRASE", "NCCL_AUTH", "CUCO_AUTHORIZATION", "SLURM_DB_PWD",
                  "CUDA_PROXY_AUTHTOKEN", "LC_PASS_X")


def test_allow_listed_prefixes_do_not_carry_password_or_auth_names(monkeypatch):
    for name in PASSWORD_NAMES:
        monkeypatch.setenv(name, "pw-secret-value")
    monkeypatch.setenv("NCCL_P2P_BYPASS_LEVEL", "1")     # PASS inside a word is not a password
    env = _env_of_a_run()
    assert not [k for k in PASSWORD_NAMES if k in env], env
    assert "pw-secret-value" not in "".join(env.values())
    assert env["NCCL_P2P_BYPASS_LEVEL"] == "1" and "PATH" in env


def _script_nvcc(tmp_path: Path, body: str) -> Path:
    """A test double of nvcc (a shell script), standing in for the compiler to observe what it is given."""
    path = tmp_path / "nvcc_double.sh"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def toolchain():
    from cuco.toolchain import Toolchain, ToolchainError

    try:
        return Toolchain.detect(arch="sm_90")
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")


def test_nvcc_does_not_see_provider_keys(toolchain, tmp_path, monkeypatch):
    monkeypatch.setenv("WATSONX_APIKEY", "wx-secret-value")
    monkeypatch.setenv("SNOWFLAKE_JWT", "jwt-secret-value")
    double = attrs.evolve(toolchain, nvcc=_script_nvcc(tmp_path, "env; exit 1"))
    result = double.compile([tmp_path / "x.cu"], tmp_path / "x.so")
    assert not result.ok and "PATH=" in result.log
    assert "secret-value" not in result.log


def test_disk_full_is_said_first_and_never_cached(toolchain, tmp_path):
    from cuco.evaluate.compile import Compiler

    double = attrs.evolve(toolchain, nvcc=_script_nvcc(
        tmp_path, 'echo "/usr/bin/ld: final link failed: No space left on device" >&2; exit 1'))
    compiler = Compiler(double, cache_dir=tmp_path / "cache", jobs=1)
    first = compiler.compile("int main() { return 0; }\n")
    assert not first.ok and first.log_excerpt.startswith("ld: final link failed: No space left on device")
    again = compiler.compile("int main() { return 0; }\n")
    assert not again.cached and not (tmp_path / "cache" / first.key / "error.txt").exists()


def test_cache_sweep_removes_dead_temp_files_and_bounds_the_size(tmp_path):
    import os
    import subprocess
    import time

    from cuco.evaluate.compile import sweep_cache

    dead = subprocess.Popen(["true"])
    dead.wait()
    entries = []
    for i in range(4):
        e = tmp_path / f"key{i}"
        e.mkdir()
        (e / "candidate.so").write_bytes(b"x" * 1000)
        entries.append(e)
    stale = entries[0] / f".candidate.so.{dead.pid}.tmp"
    live = entries[1] / f".candidate.so.{os.getpid()}.tmp"
    stale.write_bytes(b"t")
    live.write_bytes(b"t")
    for i, e in enumerate(entries):
        os.utime(e, (time.time() - 100 + i, time.time() - 100 + i))  # key0 least recently used
    sweep_cache(tmp_path, max_bytes=1500)
    assert not stale.exists() and live.exists()
    assert [e.exists() for e in entries] == [False, True, False, True]  # key1: a compile is writing it
