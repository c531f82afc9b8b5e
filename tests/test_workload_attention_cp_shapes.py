"""attention_cp shapes and bad input: named shapes, per-world bench shapes, and a ShapeError naming the fix for
every constraint, before anything builds."""

import pytest
from hypothesis import given, strategies as st

from cuco import workloads
from cuco.workload import ShapeError
from cuco.workloads.attention_cp import shapes

WL = workloads.get("attention_cp")


def test_named_shapes_are_the_issue_shapes():
    assert WL.parse_shape("s4096-d32").dims == (4096, 32, 32, 32, 1)
    assert WL.parse_shape("s8192-d64").dims == (8192, 32, 32, 64, 1)
    assert WL.parse_shape("llama3-8b").dims == (8192, 32, 8, 128, 1)
    assert WL.parse_shape("8192,32,8,128,0").dims == (8192, 32, 8, 128, 0)
    for world in (1, 2, 4, 8):
        for s in WL.bench_shapes:
            WL.check_shape(s, world)


def test_llama_keeps_8192_tokens_per_rank():
    for world in (1, 2, 4):
        llama = [s for s in WL.shapes_for(world, "bench") if s.dims[3] == 128]
        assert {s.dims[0] for s in llama} == {8192 * world}
    assert len(WL.shapes_for(2, "bench")) == 6


def test_verify_shapes_exist_for_every_world():
    for world in (1, 2, 3, 4, 8, 16):
        found = WL.shapes_for(world, "verify")
        assert found, world
        for s in found:
            WL.check_shape(s, world)


@pytest.mark.parametrize("text,world,fix", [
    ("s4096-d16", 1, "unknown attention_cp shape"),
    ("1,2,3", 1, "5 sizes"),
    ("4096,32,32,96,1", 1, "head dim D=96 is not supported.*pick one of"),
    ("4096,32,12,64,1", 1, "multiple of HKV=12"),
    ("4096,32,0,64,1", 1, "multiple of HKV=0"),
    ("3072,32,32,64,1", 8, "multiple of 128"),
    ("4098,32,32,64,1", 2, "must be a multiple of 4.*S = 4"),
    ("4000,32,32,64,1", 2, "1000 tokens per chunk, not a multiple of 128"),
    ("4096,32,32,64,2", 1, "CAUSAL must be 0"),
    ("s4096-d32", 100, "between 1 and 72"),
])
def test_bad_input_names_the_constraint(text, world, fix):
    with pytest.raises(ShapeError, match=fix):
        WL.check_shape(WL.parse_shape(text), world)


@given(world=st.integers(1, 8), k=st.integers(1, 4), causal=st.integers(0, 1))
def test_divisible_sequences_pass_and_others_fail(world, k, causal):
    parts = 2 * world if causal else world
    WL.check_shape(WL.parse_shape(f"{parts * k * 128},8,2,64,{causal}"), world)
    with pytest.raises(ShapeError):
        WL.check_shape(WL.parse_shape(f"{parts * k * 128 + 64},8,2,64,{causal}"), world)


def test_flops_halve_for_causal():
    full = shapes.flops(WL.parse_shape("8192,32,8,128,0"), 1)
    assert full == 4.0 * 8192 * 8192 * 32 * 128
    assert shapes.flops(WL.parse_shape("llama3-8b"), 1) == full / 2
    assert shapes.comm_bytes(WL.parse_shape("llama3-8b"), 1) == 0
