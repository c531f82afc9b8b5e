"""MoE routing: the invariants (property tests) and bit-identity between routing.py and the plugin's routing.h."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from cuco.workloads.moe import routing as R

HEADER_DIR = Path(R.__file__).resolve().parent


@st.composite
def specs(draw):
    experts = draw(st.integers(1, 40))
    topk = draw(st.integers(1, min(experts, 8)))
    tokens = draw(st.integers(1, 96))
    skew = draw(st.integers(1, 6))
    try:
        return R.RoutingSpec(tokens, experts, topk, skew)
    except R.RoutingError:
        from hypothesis import assume
        assume(False)


@settings(max_examples=60, deadline=None)
@given(specs(), st.integers(0, 2**32), st.integers(0, 7))
def test_routing_invariants(spec, seed, rank):
    ex, g = R.route(spec, seed, rank)
    assert ex.shape == g.shape == (spec.tokens, spec.topk)
    assert ex.min() >= 0 and ex.max() < spec.experts
    for row in ex:                                  # top-k picks distinct experts
        assert len(set(row.tolist())) == spec.topk
    counts = np.bincount(ex.ravel(), minlength=spec.experts)
    assert counts.sum() == spec.slots
    assert sorted(counts[1:].tolist()) == sorted(spec.counts()[1:])
    assert counts[0] == spec.counts()[0]
    if spec.experts > 1:                            # expert 0 gets r times each other expert, up to rounding
        other = spec.slots // (spec.skew + spec.experts - 1)
        assert counts[0] == spec.slots * spec.skew // (spec.skew + spec.experts - 1)
        assert counts[1:].min() >= other and counts[1:].max() <= other + 1
    assert (g > 0).all()
    np.testing.assert_allclose(g.sum(axis=1), 1.0, rtol=1e-5)


def test_skew_is_the_ratio_of_slots():
    spec = R.RoutingSpec(4096, 2, 1, 3)             # the paper's shape at 3:1
    ex, _ = R.route(spec, 7, 0)
    c = np.bincount(ex.ravel(), minlength=2)
    assert c.tolist() == [3072, 1024]


def test_routing_is_seeded_random_not_a_pattern():
    spec = R.RoutingSpec(256, 16, 2, 3)
    a, ga = R.route(spec, 1, 0)
    b, gb = R.route(spec, 2, 0)
    c, _ = R.route(spec, 1, 1)
    assert not np.array_equal(a, b) and not np.array_equal(a, c) and not np.array_equal(ga, gb)
    a2, ga2 = R.route(spec, 1, 0)
    assert np.array_equal(a, a2) and np.array_equal(ga, ga2)
    # expert 0's tokens are spread over the token range, not a block at the start
    tok0 = np.nonzero((a == 0).any(axis=1))[0]
    assert tok0.min() < 64 and tok0.max() > 192


@pytest.mark.parametrize("tokens,experts,topk,skew,fix", [
    (0, 4, 1, 1, "T"), (8, 0, 1, 1, "E"), (8, 4, 5, 1, "top-k"), (8, 4, 1, 0, "skew r"),
    (8, 2, 2, 2, "top-k*r <= r+E-1"),
])
def test_bad_routing_names_the_constraint(tokens, experts, topk, skew, fix):
    with pytest.raises(R.RoutingError, match=fix.replace("*", r"\*").replace("+", r"\+")):
        R.RoutingSpec(tokens, experts, topk, skew)


def test_received_counts_follow_ownership():
    spec = R.RoutingSpec(64, 8, 2, 3)
    rc = R.received_counts(spec, 5, 4)
    assert rc.shape == (4, 8) and (rc.sum(axis=1) == 128).all()
    assert [R.owner(e, 8, 4) for e in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]


_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "routing.h"
int main(int argc, char** argv) {
  long T = atol(argv[1]), E = atol(argv[2]), K = atol(argv[3]), R = atol(argv[4]);
  unsigned long long seed = strtoull(argv[5], 0, 10); int rank = atoi(argv[6]);
  std::vector<int32_t> ex(T * K); std::vector<float> g(T * K);
  cuco_moe::route(T, E, K, R, seed, rank, ex.data(), g.data());
  for (long i = 0; i < T * K; ++i) printf("%d %a\n", ex[i], g[i]);
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    d = tmp_path_factory.mktemp("routing")
    (d / "drv.cpp").write_text(_DRIVER)
    subprocess.run([cxx, "-std=c++17", "-O1", f"-I{HEADER_DIR}", str(d / "drv.cpp"), "-o", str(d / "drv")],
                   check=True)
    return d / "drv"


@pytest.mark.parametrize("tokens,experts,topk,skew,seed,rank", [
    (64, 2, 1, 3, 1, 0), (96, 16, 4, 1, 123456789012, 3), (40, 12, 3, 5, 2**63 + 5, 1), (33, 1, 1, 1, 9, 0),
])
def test_cpp_routing_matches_python_bit_for_bit(driver, tokens, experts, topk, skew, seed, rank):
    out = subprocess.run([str(driver), *map(str, (tokens, experts, topk, skew, seed, rank))], check=True,
                         capture_output=True, text=True).stdout.split("\n")
    ex, g = R.route(R.RoutingSpec(tokens, experts, topk, skew), seed, rank)
    cx = np.array([int(line.split()[0]) for line in out if line], dtype=np.int32)
    cg = np.array([float.fromhex(line.split()[1]) for line in out if line], dtype=np.float32)
    assert np.array_equal(cx, ex.ravel())
    assert np.array_equal(cg, g.ravel())
