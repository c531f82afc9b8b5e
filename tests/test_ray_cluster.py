"""The documented Ray flow, as a user runs it: `ray start --head` in a process of its own (here with a temp dir,
port and home of its own, declaring 2 GPUs this machine lacks, and stopped at teardown), then `cuco run
--executor ray --address HEAD`. The home holds an auth token, as it does once any local Ray instance has run, so
the head requires token authentication."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from cuco.toolchain import cache_dir  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path, temp: Path) -> dict[str, str]:
    # no Ray address or auth mode from outside; no CUDA_VISIBLE_DEVICES, which Ray would hold the declared GPUs to
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "HOME": str(home), "RAY_TMPDIR": str(temp), "CUCO_CACHE_DIR": str(cache_dir())}


@pytest.fixture(scope="module")
def head():
    """host:port of a head started by `ray start --head --block` in its own process group."""
    temp = Path(tempfile.mkdtemp(prefix="cuco-rh-"))  # short: Ray's socket paths live under it
    home = temp / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("cuco-test-" + os.urandom(16).hex())
    port = _free_port()
    ray_cli = Path(sys.executable).with_name("ray")
    proc = subprocess.Popen([str(ray_cli), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
                             f"--temp-dir={temp / 'ray'}", "--num-cpus=2", "--num-gpus=2", "--include-dashboard=false",
                             "--disable-usage-stats"], env=_env(home, temp), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (temp / "ray" / "ray_current_cluster").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start --head did not come up: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", home, temp
    finally:
        proc.terminate()  # `ray start --block` drains, then stops the processes it started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever did not stop (all in its process group)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_start_head_then_cuco_run_with_its_address(head, tmp_path):
    address, home, temp = head
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "cuco.cli", "run", "gemm_allgather", "--executor", "ray",
                          "--address", address, "--evals", "2", "--quiet", "--run-dir", str(run)],
                         env=_env(home, temp / "driver"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["evaluated"] == 2, summary
    # the head declares 2 GPUs it lacks: every candidate is an infrastructure failure, none a failure of its own
    assert set(summary["counts"]) == {"unmeasured"}, summary["counts"]
    assert summary["fastpath"]["feedback"].startswith("infrastructure:"), summary["fastpath"]
