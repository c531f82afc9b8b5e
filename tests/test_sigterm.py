"""SIGTERM (a scheduler's preemption) is not SIGKILL: `cuco run` stopped by it in the middle of a compile
removes its temp build folders and nvcc's tmpxft_* files, leaves no process, and a resume continues the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuco.manifest import MANIFEST_FILE

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "host_programs"


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{proc.name}: {cmdline[:200]}")
    return found


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc: the point is a real compile")
def test_sigterm_in_a_compile_leaves_no_temp_file_and_no_process(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TMPDIR=str(tmp), CUCO_CACHE_DIR=str(tmp_path / "cache"), CUDA_VISIBLE_DEVICES="")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "cuco.cli", "run", str(CORPUS / "rs_grad_shard.cu"), "--evals", "2",
                             "--run-dir", str(run), "--quiet"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        # nvcc at work on a candidate of a started run: the run's manifest is written (the program itself is
        # compiled before anything is written, so a stop there leaves nothing to resume) and nvcc's temp files exist
        while not ((run / MANIFEST_FILE).exists() and list(tmp.rglob("tmpxft_*"))):
            assert proc.poll() is None, f"cuco ended before a compile was seen: {proc.communicate()[1][-2000:]}"
            assert time.monotonic() < deadline, "no compile started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err[-2000:]
    assert "interrupted" in err
    time.sleep(0.5)
    assert _processes_mentioning(str(tmp_path)) == []
    left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))
    assert left == [], left
    resumed = subprocess.run([sys.executable, "-m", "cuco.cli", "run", str(CORPUS / "rs_grad_shard.cu"), "--run-dir",
                              str(run), "--resume", "--quiet"], env=env, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["evaluated"] == 2


_COMPILE = """
import sys
from pathlib import Path
from cuco.toolchain import Toolchain
src = Path(sys.argv[2]) / "c.cu"
src.write_text(Path(sys.argv[3], "tests/fixtures/evaluate/good_candidate.cu").read_text())
Toolchain.detect(need_cublas=False).compile([src], Path(sys.argv[2], "out", "c.so"),
                                            include_dirs=[Path(sys.argv[3], "csrc/include")], timeout_s=float(sys.argv[1]))
"""


def _compiling(tmp_path: Path, timeout_s: float) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TMPDIR=str(tmp_path / "tmp"))
    return [sys.executable, "-c", _COMPILE, str(timeout_s), str(tmp_path), str(ROOT)], env


def _empty_within(folder: Path, within_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := sorted(p.name for p in folder.rglob("*"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc: the point is a real compile")
def test_a_compile_whose_process_is_killed_by_sigkill_leaves_no_temp_file(tmp_path):
    """The launcher outlives its SIGKILLed caller long enough to stop nvcc and remove the compile's scratch."""
    (tmp_path / "tmp").mkdir()
    argv, env = _compiling(tmp_path, 300)
    killed = subprocess.Popen(argv, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "tmp").rglob("tmpxft_*")):
            assert killed.poll() is None and time.monotonic() < deadline, "no compile started"
            time.sleep(0.02)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    assert _empty_within(tmp_path / "tmp") == []


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc: the point is a real compile")
def test_the_scratch_of_a_dead_process_is_removed_by_the_next_compiling_process(tmp_path):
    """What a SIGKILL of the launcher too leaves (nothing could clean up): the next process that compiles sweeps
    the scratch folders of pids that are gone, and keeps those of live ones."""
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    tmp = tmp_path / "tmp"
    (tmp / f"cuco-nvcc-{dead_pid.pid}-x1").mkdir(parents=True)
    (tmp / f"cuco-nvcc-{dead_pid.pid}-x1" / "tmpxft_0000_00000000-1.cpp").write_text("left by a SIGKILL")
    (tmp / f"cuco-nvcc-{os.getpid()}-x2").mkdir()                  # a live process's compile: kept
    argv, env = _compiling(tmp_path, 0.5)
    subprocess.run(argv, env=env, timeout=300, check=True)
    assert sorted(p.name for p in tmp.iterdir()) == [f"cuco-nvcc-{os.getpid()}-x2"]


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc: the point is a real compile")
def test_a_compile_stopped_by_its_timeout_leaves_no_nvcc_temp_file(tmp_path):
    """The launcher stops nvcc with SIGTERM then SIGKILL: nvcc's tmpxft_* files would stay in the shared temp dir."""
    (tmp_path / "tmp").mkdir()
    argv, env = _compiling(tmp_path, 1.5)
    subprocess.run(argv, env=env, timeout=300, check=True)
    assert not (tmp_path / "out" / "c.so").exists(), "the compile finished: the test needs a shorter timeout"
    assert _empty_within(tmp_path / "tmp") == []
    assert not list((tmp_path / "out").glob(".*.tmp"))
