"""KV-transfer shapes: named shapes run at W = 1, 2, 4, 8, and bad input (block size, head dim, odd world) is refused
with the fix named before anything builds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuco.workload import Shape, ShapeError
from cuco.workloads import get
from cuco.workloads.kv_transfer import shapes

WL = get("kv_transfer")


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_every_named_shape_runs_on_paired_worlds(world):
    for name, shape in shapes.NAMED.items():
        WL.check_shape(shape, world)
    assert len(WL.shapes_for(world)) == 10 and len(WL.shapes_for(world, "verify")) == 2


def test_the_published_sweep_and_the_long_prompt():
    sweep = {(s, kv) for s, kv, layers in (sh.dims for sh in WL.bench_shapes) if layers == 32}
    assert {(s, kv) for s in (2048, 3072, 4096) for kv in (512, 768, 1024)} <= sweep
    assert WL.parse_shape("long").dims == (32768, 1024, 32)
    assert WL.parse_shape("2048,512,32") == WL.parse_shape("s2048-kv512")


@given(s=st.integers(1, 10**5).filter(lambda s: s % 16))
def test_a_prompt_that_is_not_whole_blocks_is_refused(s):
    with pytest.raises(ShapeError, match="block size 16.*pad the prompt"):
        WL.check_shape(Shape((s, 1024, 32)), 1)


@given(kv=st.integers(1, 4096).filter(lambda kv: kv % 128))
def test_a_kv_width_that_is_not_whole_heads_is_refused(kv):
    with pytest.raises(ShapeError, match="multiple of the head dim 128"):
        WL.check_shape(Shape((2048, kv, 32)), 1)


@given(world=st.integers(1, 35).map(lambda k: 2 * k + 1))
def test_an_odd_world_is_refused(world):
    with pytest.raises(ShapeError, match="is odd.*rank 2p prefills"):
        WL.check_shape(Shape((2048, 1024, 32)), world)


def test_other_limits_name_their_fix():
    with pytest.raises(ShapeError, match="multiple of 128"):
        WL.check_shape(Shape((2064, 1024, 32)), 1)  # whole blocks, but not whole FMHA key tiles
    with pytest.raises(ShapeError, match="layers"):
        WL.check_shape(Shape((2048, 1024, 0)), 1)
    with pytest.raises(ShapeError, match="3 sizes"):
        WL.parse_shape("2048,1024")
    with pytest.raises(ShapeError, match="known: s2048-kv512"):
        WL.parse_shape("huge")


@given(kv_heads=st.integers(1, 32))
def test_query_heads_are_whole_groups_of_kv_heads(kv_heads):
    q = shapes.query_heads(128 * kv_heads)
    assert q % kv_heads == 0 and 32 - kv_heads < q <= 32
    assert shapes.query_heads(512) == shapes.query_heads(1024) == 32 and shapes.query_heads(768) == 30


def test_flops_and_bytes_follow_the_layers():
    one, two = Shape((2048, 1024, 1)), Shape((2048, 1024, 2))
    assert shapes.flops(two, 1) == 2 * shapes.flops(one, 1) > 0
    assert shapes.comm_bytes(Shape((4096, 1024, 32)), 2) == 2 * 2 * 4096 * 1024 * 32
