"""benchmarks/moe_gather_variants.py without a GPU: a variant changes exactly the constants it names in a rendered
candidate, the grid is every combination, and bad input is refused before anything compiles."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import moe_gather_variants as mgv  # noqa: E402

from cuco.design_space import Directives  # noqa: E402
from cuco.workloads.moe.render import render, render_exchange_path  # noqa: E402


@pytest.fixture(scope="module")
def fused() -> str:
    return render(Directives.from_label(mgv.POINTS[0]))


@settings(max_examples=30, deadline=None)
@given(unroll=st.integers(1, 16), batch=st.integers(1, 8), ctas=st.integers(1, 64))
def test_a_variant_changes_its_constants_and_nothing_else(fused, unroll, batch, ctas):
    out = mgv.with_constants(fused, {"unroll": unroll, "batch": batch, "ctas": ctas})
    assert f"constexpr int kGatherUnroll = {unroll};" in out
    assert f"constexpr int kRowBatch = {batch};" in out
    assert f"constexpr int kCommCtas = {ctas};" in out
    changed = [(a, b) for a, b in zip(fused.splitlines(), out.splitlines()) if a != b]
    assert len(out.splitlines()) == len(fused.splitlines())
    assert all("constexpr int k" in a for a, _ in changed) and len(changed) <= 3


def test_the_dispatch_alone_has_the_constants_too():
    code = render_exchange_path(Directives.from_label(mgv.POINTS[1]), combine=False)
    assert "constexpr int kRowBatch = 8;" in mgv.with_constants(code, {"batch": 8})


def test_the_control_is_rendered_unchanged(fused):
    assert mgv.with_constants(fused, {}) == fused


@pytest.mark.parametrize("values, words", [({"stages": 2}, "unknown constant"), ({"unroll": 0}, "positive"),
                                           ({"batch": "4"}, "positive")])
def test_bad_values_are_refused(fused, values, words):
    with pytest.raises(ValueError, match=words):
        mgv.with_constants(fused, values)


def test_a_candidate_without_the_constant_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="update this script"):
        mgv.with_constants("__global__ void k() {}", {"unroll": 8})


def test_the_grid_is_every_combination():
    grid = mgv.variants([4, 8], [1, 4], [16, 32, 64])
    assert len(grid) == 12 and len({tuple(v.values()) for v in grid}) == 12


@pytest.mark.parametrize("text", ["", "4,x", "0,4", "-1"])
def test_bad_lists_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        mgv._ints(text)
