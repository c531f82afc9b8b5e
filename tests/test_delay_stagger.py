"""Delayed arrival is staggered by rank (csrc/harness/delay.h, and users' programs' hooks): every rank's
communication starts later than the rank below it, so a reader that skips its wait on a higher rank reads before
that rank has written. With one delay for every rank, MoE's outputs-never-wait fixture verified at W = 2
(benchmarks/results/w2/delay_stagger/). The harness's rule is compiled and run on the CPU here."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.toolchain import ToolchainError, csrc_dir, find_nvcc, toolkit_home

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "delay.h"
int main(int argc, char** argv) {
  double base = atof(argv[1]);
  for (int r = 0; r < 8; ++r) printf("%.6f\n", cuco_harness::staggered_delay_us(base, r));
}
"""


@pytest.fixture(scope="module")
def stagger(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++) on PATH")
    try:
        cuda_include = toolkit_home(find_nvcc()) / "include"
    except ToolchainError as exc:  # no CUDA toolkit: delay.h needs cuda_runtime.h
        pytest.skip(f"no CUDA toolkit ({exc})")
    tmp = tmp_path_factory.mktemp("stagger")
    (tmp / "main.cpp").write_text(PROGRAM)
    exe = tmp / "stagger"
    subprocess.run([cxx, "-std=c++17", f"-I{csrc_dir() / 'harness'}", f"-I{cuda_include}", str(tmp / "main.cpp"),
                    "-o", str(exe)], check=True, capture_output=True, text=True, timeout=300)
    return lambda base: [float(v) for v in subprocess.run([str(exe), repr(base)], capture_output=True, text=True,
                                                          check=True, timeout=60).stdout.split()]


@settings(max_examples=20, deadline=None)
@given(base=st.floats(min_value=1.0, max_value=1e5))
def test_each_rank_starts_at_least_half_the_base_later_than_the_rank_below(stagger, base):
    delays = stagger(base)
    assert delays[0] == pytest.approx(base, rel=1e-6)
    assert all(hi - lo >= 0.5 * base * (1 - 1e-6) for lo, hi in zip(delays, delays[1:])), delays


def test_users_programs_stagger_by_the_same_rule():
    """The hooks of a rewritten program (program_hooks.cuh) delay rank r by delayNs() * (1 + r / 2) as well, and
    the fast path's launch passes its communicator's rank."""
    fastpath = Path(__file__).resolve().parents[1] / "src" / "cuco" / "fastpath" / "cuda"
    hooks = (fastpath / "program_hooks.cuh").read_text()
    assert re.search(r"delayKernel<<<1, 1, 0, st>>>\(delayNs\(\) \+ delayNs\(\) \* rank / 2\)", hooks)
    assert "delayComm(st, s->rank);" in (fastpath / "lsa_runtime.cuh").read_text()
