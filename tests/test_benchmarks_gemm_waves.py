"""benchmarks/gemm_waves.py without a GPU: the waves it predicts and the shapes it refuses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gemm_waves  # noqa: E402


@given(m=st.integers(1, 300), n=st.integers(1, 300), ctas=st.integers(2, 264))
def test_waves_cover_every_cluster_tile_once_and_no_more(m, n, ctas):
    m, n = 128 * m, 128 * n
    w, clusters, tiles = gemm_waves.waves(m, n, ctas), ctas // 2, gemm_waves.cluster_tiles(m, n)
    assert (w - 1) * clusters < tiles <= w * clusters


def test_the_fused_points_sms_on_one_h200():
    # 8192^3: 2048 cluster tiles take 32 waves on 132 or 128 CTAs, 34 on the 124 that 8 pull SMs leave
    assert [gemm_waves.waves(8192, 8192, c) for c in (132, 128, 124)] == [32, 32, 34]


@pytest.mark.parametrize("bad", ["8192,8192", "8192,8192,100", "0,128,128", "a,b,c"])
def test_bad_shapes_are_refused_naming_the_form(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="M,K,N|multiples"):
        gemm_waves.parse_shape(bad)


def test_the_cooperative_tile_halves_the_cluster_tiles():
    assert gemm_waves.cluster_tiles(8192, 8192, 256) * 2 == gemm_waves.cluster_tiles(8192, 8192)


@pytest.mark.parametrize("flag", [["--configs", "pingpong,fast"], ["--swizzles", "3"], ["--comm", "-1"]])
def test_bad_options_are_refused_before_the_gpu(flag, capsys):
    with pytest.raises(SystemExit):
        gemm_waves.main(["--lib", "/nonexistent.so", *flag])
    assert "--" + flag[0].lstrip("-") in capsys.readouterr().err
