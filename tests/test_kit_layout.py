"""Index and offset arithmetic of cuco/kit/layout.cuh, compiled and run on the CPU for W = 2, 4, 8 (a W = 1 GPU
run never exercises peer offsets). A layout that breaks is caught: see the broken variant below."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuco.toolchain import csrc_dir

TEST = Path(__file__).parent / "fixtures" / "kit" / "layout_test.cpp"


def _run(tmp_path: Path, header_dir: Path) -> subprocess.CompletedProcess:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++) on PATH")
    exe = tmp_path / "layout_test"
    subprocess.run([cxx, "-std=c++17", "-O1", f"-I{header_dir}", str(TEST), "-o", str(exe)], check=True,
                   capture_output=True, text=True, timeout=300)
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)


def test_layout_holds_for_w_2_4_8(tmp_path):
    out = _run(tmp_path, csrc_dir() / "include")
    assert out.returncode == 0 and out.stdout.startswith("OK "), out.stdout
    assert int(out.stdout.split()[1]) == 3 * 5 * 3 * 5


def test_a_broken_layout_fails(tmp_path):
    """The same test against a layout whose arrive[] overlaps done[] (an off-by-W) must report it."""
    broken = tmp_path / "include"
    shutil.copytree(csrc_dir() / "include", broken)
    header = broken / "cuco" / "kit" / "layout.cuh"
    text = header.read_text()
    good = "return 2 * (size_t)world + (size_t)rank * nchunks + c;"
    assert good in text
    header.write_text(text.replace(good, "return (size_t)world + (size_t)rank * nchunks + c;"))
    out = _run(tmp_path, broken)
    assert out.returncode == 1 and "symmetric flags overlap" in out.stdout, out.stdout
