"""benchmarks/gemm_under_copy.py without a GPU: its copy plans, summary statistics and refusals of bad input."""

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


@given(st.sampled_from(gemm_under_copy.COPY_MODES), st.integers(2, 8))
def test_every_copy_plan_delivers_each_block_to_each_other_gpu_once(mode, world):
    plan = gemm_under_copy.copy_plan(mode, world)
    every_pair = [(d, p) for d in range(world) for p in range(world) if p != d]
    assert sorted((dst, src) for _, _, dst, src in plan) == every_pair
    for issuer, stream, dst, src in plan:
        assert issuer == (src if mode == "push" else dst)
        assert 0 <= stream < world - 1 and (stream == 0 or mode == "pull_per_peer")
    by_issuer = {}
    for issuer, stream, dst, src in plan:
        by_issuer.setdefault(issuer, []).append((stream, dst, src))
    for d, copies in by_issuer.items():
        if mode == "pull_per_peer":  # each peer on its own stream: the pulls run at once
            assert len({c[0] for c in copies}) == world - 1
        # the i-th copy of every issuer reaches a different peer: no GPU is read (or written) by all at once
        assert [c[2] if mode != "push" else c[1] for c in copies] == [(d + s) % world for s in range(1, world)]


def test_an_unknown_copy_mode_is_refused_naming_the_modes():
    with pytest.raises(ValueError, match="pull, pull_per_peer, push"):
        gemm_under_copy.copy_plan("broadcast", 2)


@pytest.mark.parametrize("args, expect", [
    (["--world", "1", "--shapes", "8192,8192,8192"], "the copies need 2 GPUs or more"),
    (["--shapes", "8192,8192"], "--shapes takes 'M,K,N;...'"),
    (["--shapes", "8191,8192,8192", "--world", "2"], "M must be a multiple of --world 2"),
])
def test_bad_input_is_refused_before_any_gpu_work(tmp_path, args, expect):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gemm_under_copy.py"), "--json",
                          str(tmp_path / "x.json"), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and expect in out.stderr, out.stderr
    assert not (tmp_path / "x.json").exists()
