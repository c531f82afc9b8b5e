"""MoE workload on the CPU: shapes and bad input, the design space and its rules, rendering on the kit's skeleton,
the fixtures (legal candidates only verification can catch), layout arithmetic."""

import pytest

from cuco import workloads
from cuco.design_space import Directives, IllegalPointError, Topology
from cuco.evaluate.static import check_static
from cuco.kit.evolve import split
from cuco.workload import ShapeError
from cuco.workloads.moe import fixtures, shapes

WL = workloads.get("moe")


def test_named_shapes_are_the_issue_shapes():
    assert WL.parse_shape("paper-r3").dims == (4096, 7168, 2048, 2, 1, 3)
    assert WL.parse_shape("dsv3-r1").dims == (4096, 7168, 2048, 256, 8, 1)
    assert WL.parse_shape("256,512,256,8,2,3").dims == (256, 512, 256, 8, 2, 3)
    for name in ("paper-r2", "paper-r5", "dsv3-r3"):
        WL.check_shape(WL.parse_shape(name), 1)
        WL.check_shape(WL.parse_shape(name), 2)
    WL.check_shape(WL.parse_shape("dsv3-r3"), 8)


@pytest.mark.parametrize("text,world,fix", [
    ("paper-r9", 1, "unknown moe shape name"),
    ("dsv3", 1, "unknown moe shape name"),
    ("1,2,3", 1, "6 sizes"),
    ("4096,7168,2048,6,1,3", 4, "multiple of the world size 4"),
    ("4096,7168,2048,2,3,1", 1, "top-k must be between 1 and E"),
    ("4096,7168,2048,8,1,0", 1, "skew r must be >= 1"),
    ("4096,7000,2048,8,1,1", 1, "H=7000 must be a positive multiple of 128"),
    ("4096,7168,2000,8,1,1", 1, "I=2000 must be a positive multiple of 64"),
    ("0,7168,2048,8,1,1", 1, "T=0 tokens per rank"),
    ("64,256,128,4,4,2", 1, "top-k\\*r <= r\\+E-1"),
    ("paper-r3", 128, "between 1 and 72"),
])
def test_bad_input_names_the_constraint(text, world, fix):
    with pytest.raises(ShapeError, match=fix):
        WL.check_shape(WL.parse_shape(text), world)


def test_space_and_rules():
    space = WL.space(Topology(world=1, nodes=1, gin_available=False, nvshmem_available=False))
    points = list(space.points())
    assert len(points) == 40
    assert {p.get("dispatch_dtype") for p in points} == {"bf16", "fp8"}
    assert {p.placement for p in points} == {"deferred", "split_put_wait", "stream_overlap", "fused"}
    labels = {p.label() for p in points}
    assert "lsa/stream_overlap/signal/warp/whole/dispatch_dtype=fp8" in labels
    bad = Directives.from_label("lsa/split_put_wait/world/warp/whole/dispatch_dtype=fp8")
    assert "fp8" in space.check(bad)
    with pytest.raises(IllegalPointError, match="copy engine"):
        WL.render(Directives.from_label("lsa/fused/signal/copy_engine/1MiB/dispatch_dtype=bf16"))
    assert "chunk" in space.check(Directives.from_label("lsa/deferred/world/cta/1MiB/dispatch_dtype=bf16"))
    assert space.conservative().label() == "lsa/deferred/world/cta/whole/dispatch_dtype=bf16"


def test_gin_points_only_where_a_nic_may_be():
    one_node = list(WL.space(Topology(world=2)).points())
    gin = [p for p in one_node if p.backend == "gin"]
    nv = [p for p in one_node if p.backend == "nvshmem"]
    assert len(one_node) == 46 and len(gin) == 3 and len(nv) == 3
    assert all(p.placement == "split_put_wait" and p.sync_scope == "signal" and p.issuer != "copy_engine"
               and p.get("dispatch_dtype") == "bf16" for p in nv)
    assert "moe-nvshmem-subset" in WL.space(Topology(world=2)).check(
        Directives.from_label("nvshmem/deferred/world/cta/whole/dispatch_dtype=bf16"))
    assert {p.placement for p in gin} == {"split_put_wait"} and {p.sync_scope for p in gin} == {"signal"}
    two_nodes = list(WL.space(Topology(world=16, nodes=2)).points())
    assert {p.backend for p in two_nodes} == {"gin", "nvshmem"}
    code = WL.render(gin[1])
    assert "gin.put(world, q, win_pub" in code and "using Coop = ncclCoopWarp;" in code
    assert "n.gin_required = 1;" in code


def test_render_reflects_the_point():
    fused = WL.render(Directives.from_label("lsa/fused/signal/warp/1MiB/dispatch_dtype=fp8"))
    assert "constexpr bool kFp8 = true;" in fused and "constexpr int kGroup = 32;" in fused
    assert "ffn_arriving(ctx, st, flag, chunk_rows(g), cs)" in fused and "kChunkBytes = 1048576" in fused
    assert "n.rows_arriving = true;" in fused and "n.rows_arriving = false;" in WL.render(Directives.from_label(
        "lsa/deferred/world/warp/whole/dispatch_dtype=bf16"))
    spw = WL.render(Directives.from_label("lsa/split_put_wait/signal/cta/whole/dispatch_dtype=bf16"))
    assert "SIG_ARRIVED" in spw and "barrier(ctx" not in spw.split("EVOLVE-BLOCK-START")[1]
    ce = WL.render(Directives.from_label("lsa/stream_overlap/world/copy_engine/whole/dispatch_dtype=bf16"))
    # copy engines push each rank's tokens into the peers' staging (writes ran 2.3-2.8x faster than reads at W = 4),
    # then a barrier says every push landed; deferred pulls into its own staging before its one gather
    assert "stage_pushes(st, ss)" in ce and "barrier(ctx, ss)" in ce and "stage_pulls(st" not in ce.split("EVOLVE-BLOCK-START")[1]
    deferred = WL.render(Directives.from_label("lsa/deferred/world/copy_engine/whole/dispatch_dtype=bf16"))
    assert "stage_pulls(st, cs)" in deferred and "stage_pushes(st" not in deferred.split("EVOLVE-BLOCK-START")[1]


def test_the_exchange_alone_switches_off_the_ffn_and_then_the_combine():
    """benchmarks/moe.py times a point's dispatch and combine by themselves: its candidate with the FFN off, and with
    the combine off too; a candidate as searched keeps both on. Every LSA point renders both ways at W = 2 and 4."""
    from cuco.workloads.moe.render import COMBINE_ON, FFN_ON, render_exchange_path

    for world in (2, 4):
        for point in WL.space(Topology(world=world)).points():
            code = WL.render(point, Topology(world=world))
            assert code.count(FFN_ON) == 1 and code.count(COMBINE_ON) == 1
            if point.backend != "lsa":
                with pytest.raises(ValueError, match="LSA points"):
                    render_exchange_path(point)
                continue
            both = render_exchange_path(point)
            dispatch = render_exchange_path(point, combine=False)
            assert "constexpr bool kFfn = false;" in both and COMBINE_ON in both
            assert "constexpr bool kFfn = false;" in dispatch and "constexpr bool kCombine = false;" in dispatch
            assert split(both)[1] == split(code)[1]   # the block itself is the point's, unchanged


def test_candidates_are_on_the_kit_skeleton():
    """State, needs and the four entry points come from cuco::kit (skeleton.cuh); MoE keeps no copy of them."""
    head, _block, tail = split(WL.render(Directives.from_label("lsa/deferred/world/cta/whole/dispatch_dtype=bf16")))
    assert "struct State : cuco::kit::Base {" in head and "struct Needs : cuco::kit::Needs {" in head
    for entry in ("requirements", "setup", "launch", "teardown"):
        assert f"return cuco::kit::{entry}<cuco_moe::Candidate>(ctx" in tail, entry
    assert "n.sym_bytes = kSymBytes;" in tail  # the per-source flags, as before the skeleton
    assert "ev_start" not in head + tail and "load_stream_ops" not in head + tail


@pytest.mark.parametrize("name", fixtures.NEVER_WAITS)
def test_never_waits_fixtures_are_legal_candidates(name):
    """A never-waits fixture differs from its base point in the block only and passes the static check against it:
    only verification under delayed arrival can catch it."""
    code, base = fixtures.ALL[name](), WL.render(Directives.from_label(fixtures.BASES[name]))
    assert code != base and "fixture:" in split(code)[1]
    assert split(code)[0] == split(base)[0] and split(code)[2] == split(base)[2]
    result = check_static(code, parent_code=base)
    assert result.passed, result.reason


@pytest.mark.parametrize("name", [n for n in fixtures.ALL if n not in fixtures.NEVER_WAITS])
def test_check_fixtures_change_one_line_of_their_base(name):
    code, base = fixtures.ALL[name](), WL.render(Directives.from_label(fixtures.BASES[name]))
    changed = set(code.splitlines()) ^ set(base.splitlines())
    assert 1 <= len(changed) <= 3 and any("fixture:" in line for line in changed), changed


def test_rows_bound_covers_every_rank():
    """The receive capacity (moe_dev.cuh rows_bound) holds what any rank receives, for W in 1, 2, 4, 8."""
    import numpy as np

    from cuco.workloads.moe import routing

    for t, e, k, r in [(64, 8, 2, 3), (96, 16, 4, 1), (40, 8, 1, 5)]:
        spec = routing.RoutingSpec(t, e, k, r)
        tot, s = r + e - 1, t * k
        for w in (1, 2, 4, 8):
            counts = routing.received_counts(spec, 3, w)
            el = e // w
            for q in range(w):
                got = int(counts[:, q * el:(q + 1) * el].sum())
                per_source = min(s, (s * r // tot + (el - 1) * (s // tot + 1)) if q == 0 else el * (s // tot + 1))
                assert got <= per_source * w
            assert np.all(counts.sum(axis=1) == s)


def test_every_world_size_has_a_verify_shape():
    for world in (1, 2, 3, 5, 6, 7, 8, 72):
        (shape, *_rest) = WL.shapes_for(world, "verify")
        WL.check_shape(shape, world)


def test_named_shapes_table_is_consistent():
    for name, shape in shapes.NAMED.items():
        shapes.check(shape, 1)
        assert shapes.flops(shape, 1) > 0
