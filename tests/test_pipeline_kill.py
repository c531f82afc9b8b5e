"""`cuco run` killed during the fast path: the run directory, manifest and database already exist, nothing
is left in the temp dir, a restart finishes the run, and a later start takes the fast path from its cache."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cuco.db import CandidateDB

ROOT = Path(__file__).resolve().parents[1]


def _cuco(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TMPDIR=str(tmp_path / "tmp"), CUCO_CACHE_DIR=str(tmp_path / "cache"), CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen([sys.executable, "-m", "cuco.cli", "run", "gemm_allgather", "--quiet", "--world", "1",
                             "--evals", "1", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # the run's messages go to stderr (the "cuco" logger), the summary to stdout


def _leftovers(tmp_path: Path, within_s: float = 10.0) -> list[str]:
    """cuco's folders left in the temp dir, once the launchers of a killed cuco had `within_s` to clean up."""
    deadline = time.monotonic() + within_s
    while True:
        left = sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("cuco-"))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _seed_compute_library(tmp_path: Path) -> None:
    """Copy gemm_allgather's compute library (built once for the suite) into this test's cache: the test starts the
    fast path's cache empty, and rebuilding the persistent CUTLASS GEMM there (about 100 s on 2 cores) tests nothing
    of it. Where it cannot be built here, the runs build it themselves."""
    from cuco.errors import CucoError
    from cuco.kit.compute import build_compute
    from cuco.toolchain import default_toolchain
    from cuco.workloads import get

    try:
        built = build_compute(get("gemm_allgather"), default_toolchain())
    except CucoError:
        return
    key_dir = built.library.parent
    shutil.copytree(key_dir, tmp_path / "cache" / "compute" / key_dir.name)


def test_killed_in_the_fast_path_then_resumed_and_the_next_start_uses_the_cache(tmp_path):
    (tmp_path / "tmp").mkdir()
    _seed_compute_library(tmp_path)
    run = tmp_path / "run"
    proc = _cuco(tmp_path, "--run-dir", str(run))
    try:
        for line in proc.stdout:
            if "fast path (rule-based" in line:
                break
        else:
            raise AssertionError("no fast path started")
        time.sleep(2.0)  # inside the fast path's compile
        assert proc.poll() is None, "the fast path ended before the kill; the test needs a slower fast path"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert json.loads((run / "manifest.json").read_text())["world"] == 1
    assert (run / "candidates.db").exists()
    assert _leftovers(tmp_path) == []

    resumed = _cuco(tmp_path, "--run-dir", str(run), "--resume")
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out[-3000:]
    assert "fast path (rule-based" in out and "fast path candidate: unmeasured" in out
    with CandidateDB(run / "candidates.db", readonly=True) as db:
        [fast] = db.all()
    assert fast.mutation == "fastpath" and fast.status == "unmeasured" and fast.results["compile"].passed
    assert json.loads((run / "summary.json").read_text())["evaluation"] == "unmeasured"
    assert not (run / "fastpath-work").exists() and _leftovers(tmp_path) == []

    again = _cuco(tmp_path, "--run-dir", str(tmp_path / "run2"))
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, out[-3000:]
    assert "fast path: cached result for this host seed" in out and "fast path (rule-based" not in out
    assert _leftovers(tmp_path) == []
