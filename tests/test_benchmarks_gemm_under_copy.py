"""benchmarks/gemm_under_copy.py without a GPU: its summary statistics and its refusals of bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import gemm_under_copy  # noqa: E402


@given(st.lists(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=9), min_size=1, max_size=4))
def test_the_figure_is_the_slowest_gpus_median(per_gpu):
    s = gemm_under_copy.summarize(per_gpu)
    medians = sorted(sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2
                     for xs in per_gpu)
    assert s["ms"] == pytest.approx(medians[-1])
    assert s["spread"] >= 0


@pytest.mark.parametrize("args, expect", [
    (["--shapes", "8192,8192"], "--shapes takes 'M,K,N;...'"),
    (["--shapes", "8191,8192,8192", "--world", "2"], "M must be a multiple of --world 2"),
])
def test_bad_input_is_refused_before_any_gpu_work(tmp_path, args, expect):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gemm_under_copy.py"), "--json",
                          str(tmp_path / "x.json"), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and expect in out.stderr, out.stderr
    assert not (tmp_path / "x.json").exists()
