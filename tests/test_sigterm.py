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
        while not list(tmp.rglob("tmpxft_*")):   # nvcc is at work: its temp files exist
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


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc: the point is a real compile")
def test_a_compile_stopped_by_its_timeout_leaves_no_nvcc_temp_file(tmp_path):
    """The reaper stops nvcc with SIGTERM then SIGKILL: nvcc's tmpxft_* files would stay in the shared temp dir."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = f"""
from pathlib import Path
from cuco.toolchain import Toolchain
src = Path({str(tmp_path / 'c.cu')!r})
src.write_text(Path({str(ROOT / 'tests/fixtures/evaluate/good_candidate.cu')!r}).read_text())
r = Toolchain.detect(need_cublas=False).compile([src], Path({str(tmp_path / 'out/c.so')!r}),
                                                include_dirs=[Path({str(ROOT / 'csrc/include')!r})], timeout_s=1.5)
assert not r.ok and "timed out" in r.log, r.log
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TMPDIR=str(tmp))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    time.sleep(0.5)
    assert sorted(p.name for p in tmp.rglob("*")) == []
    assert not list((tmp_path / "out").glob(".*.tmp"))


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="needs nvcc: the point is a real compile")
def test_the_scratch_of_a_compile_killed_by_sigkill_is_removed_by_the_next_compiling_process(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               TMPDIR=str(tmp))
    code = f"""
import sys
from pathlib import Path
from cuco.toolchain import Toolchain
src = Path({str(tmp_path / 'c.cu')!r})
src.write_text(Path({str(ROOT / 'tests/fixtures/evaluate/good_candidate.cu')!r}).read_text())
Toolchain.detect(need_cublas=False).compile([src], Path({str(tmp_path / 'out/c.so')!r}),
                                            include_dirs=[Path({str(ROOT / 'csrc/include')!r})],
                                            timeout_s=float(sys.argv[1]))
"""
    killed = subprocess.Popen([sys.executable, "-c", code, "300"], env=env)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp.rglob("tmpxft_*")):
            assert killed.poll() is None and time.monotonic() < deadline, "no compile started"
            time.sleep(0.02)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    left = [p.name for p in tmp.iterdir()]
    assert left and all(name.startswith(f"cuco-nvcc-{killed.pid}-") for name in left), left
    # another process's compile (stopped at once by its timeout) sweeps the folder of the dead one
    subprocess.run([sys.executable, "-c", code, "0.5"], env=env, timeout=300, check=True)
    time.sleep(0.5)
    assert sorted(p.name for p in tmp.iterdir()) == []
