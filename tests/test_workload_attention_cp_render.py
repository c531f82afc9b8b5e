"""attention_cp design space and rendering on the CPU: the rules, what a rendered point contains, the GIN subset,
and the fixtures (each one fault, each passing the static check against its base point)."""

import pytest

from cuco import workloads
from cuco.design_space import Directives, IllegalPointError, Topology
from cuco.evaluate.static import check_static
from cuco.workloads.attention_cp import fixtures

WL = workloads.get("attention_cp")


def _block(label: str) -> str:
    return WL.render(Directives.from_label(label)).split("EVOLVE-BLOCK-START")[1]


def test_space_and_rules():
    space = WL.space(Topology(world=1, gin_available=False))
    points = list(space.points())
    assert {p.placement for p in points} == {"deferred", "stream_overlap", "split_put_wait", "fused"}
    assert {p.issuer for p in points} == {"thread", "warp", "cta", "copy_engine"}
    assert all((p.chunk_bytes != 0) == (p.placement == "fused" and p.get("attend") == "ring") for p in points)
    assert all(p.sync_scope in ("world", "team") for p in points if p.issuer == "copy_engine")
    assert "lsa/fused/world/copy_engine/1MiB/attend=ring" in {p.label() for p in points}  # fused = the slice pipeline
    assert "lsa/stream_overlap/signal/warp/whole/attend=ring" in {p.label() for p in points}  # signals per ring step
    assert "chunk" in space.check(Directives.from_label("lsa/stream_overlap/world/cta/1MiB/attend=ring"))
    assert "barrier kernels" in space.check(Directives.from_label("lsa/stream_overlap/signal/copy_engine/whole/attend=ring"))
    assert space.conservative().label() == "lsa/deferred/world/cta/whole/attend=ring"
    with pytest.raises(IllegalPointError):
        WL.render(Directives.from_label("lsa/fused/signal/cta/whole/attend=ring"))


def test_gin_points_only_where_a_nic_may_be():
    gin = [p for p in WL.space(Topology(world=2)).points() if p.backend == "gin"]
    assert gin and all(p.placement == "split_put_wait" and p.sync_scope == "signal" for p in gin)
    assert {p.issuer for p in gin} == {"thread", "warp", "cta"}
    code = WL.render(gin[0])
    assert "gin.put(world, t, win_ring" in code and "n.gin_required = 1;" in code
    assert {p.backend for p in WL.space(Topology(world=16, nodes=2)).points()} == {"gin"}


def test_render_reflects_the_point():
    fused = _block("lsa/fused/signal/warp/1MiB/attend=ring")
    assert "using Issuer = ncclCoopWarp;" in fused and "kChunkBytes = 1048576" in fused
    assert "stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, c)]" in fused and "barrier(ctx" not in fused
    assert "ctx->rank, 0,\n" in fused  # the own block moves through the pipeline too
    overlap = _block("lsa/stream_overlap/world/copy_engine/whole/attend=ring")
    assert "cudaMemcpyAsync" in overlap and "pull_kernel" not in overlap and overlap.count("barrier(ctx, side)") == 2
    push = _block("lsa/split_put_wait/signal/cta/whole/attend=ring")
    assert "push_kernel<<<kCommCtas" in push and "f.sf.arrive(src, 0)" in push
    deferred = _block("lsa/deferred/team/thread/whole/attend=ring")
    assert "pull_kernel<<<ctx->sm_count" in deferred and "cta_lsa_barrier(dc, false)" in deferred


@pytest.mark.parametrize("make,base", [(fixtures.skipped_step, fixtures.STEPS_BASE),
                                       (fixtures.merge_without_lse, fixtures.FUSED_BASE),
                                       (fixtures.never_waits, fixtures.FUSED_BASE),
                                       (fixtures.gathered_never_waits, fixtures.GATHERED_BASE),
                                       (fixtures.gathered_fused_never_waits, fixtures.GATHERED_FUSED_BASE)])
def test_fixtures_differ_from_their_base_in_the_block_only(make, base):
    code, parent = make(), WL.render(Directives.from_label(base))
    assert code != parent
    result = check_static(code, parent_code=parent)
    assert result.passed, result.reason


@pytest.mark.parametrize("label", [p.label() for p in WL.space(Topology(world=2, gin_available=False)).points()
                                   if p.issuer == "copy_engine"])
def test_overlapping_copy_engine_points_push_into_the_readers_ring_slots(label):
    # copy engines writing over NVLink ran 2.3-2.8x faster than reading at W = 4 (results/w4/gemm_under_copy_w4.log)
    block, placement = _block(label), Directives.from_label(label).placement
    reads_peers, writes_peers = "peer_base(st, BUF_KV" in block, "peer_base(st, BUF_RING" in block
    if placement == "deferred":   # every block copied before the first step: nothing to overlap
        assert reads_peers and not writes_peers
    else:
        assert writes_peers and not reads_peers
    if placement in ("stream_overlap", "fused"):
        assert "cuco::kit::stream_publish_epoch(side" in block and "f.sym[f.sf.arrive(src" in block


def test_gathered_forms_are_points_of_their_own():
    """attend=hybrid and gathered: SM pulls into one region, deferred or stream_overlap; the hybrid attends its own
    block in place first and merges, the gathered form writes O directly; stream_overlap waits per source."""
    space = WL.space(Topology(world=4, gin_available=False))
    forms = [p for p in space.points() if p.get("attend") != "ring"]
    assert {p.placement for p in forms} == {"deferred", "stream_overlap", "fused"}
    assert {p.get("attend") for p in forms if p.placement == "fused"} == {"gathered"}
    assert all(p.chunk_bytes == 0 for p in forms)
    assert {p.issuer for p in forms} == {"thread", "warp", "cta"} and {p.get("attend") for p in forms} == {
        "hybrid", "gathered"}
    for bad in ("lsa/fused/signal/cta/whole/attend=hybrid", "lsa/split_put_wait/signal/cta/whole/attend=hybrid",
                "lsa/stream_overlap/world/copy_engine/whole/attend=gathered"):
        assert "attend=ring" in space.check(Directives.from_label(bad))
    assert "chunk_bytes=whole" in space.check(Directives.from_label("lsa/fused/signal/cta/1MiB/attend=gathered"))
    hybrid = _block("lsa/stream_overlap/world/cta/whole/attend=hybrid")
    assert "kForm = cuco_attn::kHybridForm" in hybrid and "gather_kernel<<<kCommCtas" in hybrid
    assert hybrid.index("ctx->buffers[BUF_KV].ptr, true") < hybrid.index("gather_calls")  # own block first
    assert "return finish(ctx, g, main);" in hybrid and "f.lf.chunk(src, 0)" in hybrid
    assert hybrid.count("barrier(ctx, side)") == 2 and "pull_kernel" not in hybrid
    gathered = _block("lsa/deferred/signal/thread/whole/attend=gathered")
    assert "kForm = cuco_attn::kGatheredForm" in gathered and "gather_kernel<<<ctx->sm_count" in gathered
    assert "stream_wait_epoch" not in gathered and "return 0;" in gathered and "f.sf.done(me)" in gathered
    assert "&arrival" not in gathered
    fused = _block("lsa/fused/team/warp/whole/attend=gathered")  # the FMHA waits in the kernel for causal calls
    assert "main, &arrival, fmha_ctas" in fused and "if (!c[k].suffix)" in fused
    # the waiting calls on the fewest CTAs that keep their waves; the pulls on every other SM
    assert "fmha_ctas = cuco_attn::fused_fmha_ctas(g, ctx->sm_count, kCommCtas)" in fused
    assert "gather_kernel<<<ctx->sm_count - fmha_ctas" in fused


def test_a_label_from_before_the_attend_directive_names_the_ring():
    """Labels in older results files and scripts have no attend=: they render the ring point they always named."""
    old, new = Directives.from_label("lsa/stream_overlap/signal/cta/whole"), fixtures.STEPS_BASE
    assert WL.render(old) == WL.render(Directives.from_label(new))
    assert WL.space(Topology(world=2)).complete(old).label() == new
