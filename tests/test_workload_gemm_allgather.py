"""CPU tests of the GEMM+AllGather workload: space, rendering, shape checks, and nvcc compile checks."""

from __future__ import annotations

import re

import pytest

from cuco.design_space import DesignSpace, Directives, IllegalPointError, Topology, WHOLE
from cuco.workload import Shape, ShapeError
from cuco.workloads import get
from cuco.workloads.gemm_allgather import WORKLOAD, WORKLOAD_RULES
from cuco.kit.evolve import EVOLVE_END, EVOLVE_START

SPACE = WORKLOAD.space(Topology(world=2))
POINTS = list(SPACE.points())


def _split(code: str) -> tuple[str, str, str]:
    head, rest = code.split(EVOLVE_START, 1)
    block, tail = rest.split(EVOLVE_END, 1)
    return head, block, tail


def _frozen(code: str) -> str:
    head, _block, tail = _split(code)
    return head + tail


def test_registered_and_described():
    assert get("gemm_allgather") is WORKLOAD
    assert WORKLOAD.dim_names == ("M", "K", "N")
    assert WORKLOAD.plugin_path().is_file() and WORKLOAD.seed_path().is_file()
    assert "AllGather" in WORKLOAD.description
    assert WORKLOAD.libraries == ("cublasLt",)


def test_space_size_and_backends():
    assert len(POINTS) == 166
    ce = [p for p in POINTS if p.issuer == "copy_engine"]
    assert len(ce) == 20 and all(p.backend == "lsa" and p.sync_scope in ("world", "team") for p in ce)
    # fused with copy engines: the persistent GEMM follows the flags the copy streams raise, every chunk size
    assert sorted(p.label() for p in ce if p.placement == "fused" and p.sync_scope == "world") == [
        "lsa/fused/world/copy_engine/16MiB", "lsa/fused/world/copy_engine/1MiB", "lsa/fused/world/copy_engine/4MiB",
        "lsa/fused/world/copy_engine/whole"]
    assert {p.backend for p in POINTS} == {"lsa", "gin", "nvshmem"}
    assert all(p.placement == "split_put_wait" and p.sync_scope == "signal" for p in POINTS if p.backend == "gin")
    nv = [p for p in POINTS if p.backend == "nvshmem"]
    assert len(nv) == 6 and all(p.placement == "split_put_wait" and p.sync_scope == "signal"
                                and p.issuer in ("warp", "cta") for p in nv)
    assert set(SPACE.chunk_sizes) == {WHOLE, 16 << 20, 4 << 20, 1 << 20}
    no_gin = WORKLOAD.space(Topology(world=2, gin_available=False))
    assert {p.backend for p in no_gin.points()} == {"lsa", "nvshmem"}
    lsa_only = WORKLOAD.space(Topology(world=2, gin_available=False, nvshmem_available=False))
    assert {p.backend for p in lsa_only.points()} == {"lsa"}
    multi = WORKLOAD.space(Topology(world=16, nodes=2))
    assert {p.backend for p in multi.points()} == {"gin", "nvshmem"}


def test_space_round_trips_with_workload_rules():
    again = DesignSpace.from_json(SPACE.to_json(), extra_rules=WORKLOAD_RULES)
    assert [p.label() for p in again.points()] == [p.label() for p in POINTS]


def test_every_value_of_every_directive_is_used():
    for name in ("backend", "placement", "sync_scope", "issuer", "chunk_bytes"):
        assert {getattr(p, name) for p in POINTS} == set(SPACE.values(name)), name


def test_render_is_deterministic_and_points_differ():
    codes = {p.label(): WORKLOAD.render(p) for p in POINTS}
    assert WORKLOAD.render(POINTS[7]) == codes[POINTS[7].label()]
    blocks = {_split(c)[1] for c in codes.values()}
    assert len(blocks) == len(POINTS)  # every point renders a different EVOLVE block


@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.label())
def test_markers_balanced(point: Directives):
    code = WORKLOAD.render(point)
    assert code.count(EVOLVE_START) == 1 and code.count(EVOLVE_END) == 1
    assert code.index(EVOLVE_START) < code.index(EVOLVE_END)
    _head, block, tail = _split(code)
    assert "block_needs" in block and "enqueue" in block
    assert 'extern "C" int cuco_candidate_launch' in tail


def test_frozen_text_byte_identical_across_points():
    """Everything outside the EVOLVE block, comments included, is the same for every point (the L0 frozen
    check compares it byte for byte); the point's label sits inside the block."""
    frozen = {_frozen(WORKLOAD.render(p)) for p in POINTS}
    assert len(frozen) == 1
    for p in POINTS[:5]:
        head, block, tail = _split(WORKLOAD.render(p))
        assert p.label() not in head + tail and p.label() in block


def test_render_reflects_directives():
    code = WORKLOAD.render(Directives.from_label("lsa/stream_overlap/signal/cta/4MiB"))
    block = _split(code)[1]
    assert "using Issuer = ncclCoopCta;" in block
    assert "kChunkBytes = 4194304" in block
    assert "publish_ready" in block and "pull_kernel" in block
    team = _split(WORKLOAD.render(Directives.from_label("lsa/deferred/team/thread/whole")))[1]
    assert "cuco::kit::cta_lsa_barrier(dc, false)" in team and "ncclCoopThread" in team
    world = _split(WORKLOAD.render(Directives.from_label("lsa/deferred/world/thread/whole")))[1]
    assert "cuco::kit::cta_lsa_barrier(dc, true)" in world
    gin = _split(WORKLOAD.render(Directives.from_label("gin/split_put_wait/signal/warp/1MiB")))[1]
    assert "ncclGin gin(dc, 0)" in gin and "n.gin_required = 1" in gin and "n.gin_signals = 1 + g.nchunks" in gin


def test_barrier_requirements_cover_sessions():
    """CTAs that open an LSA barrier session must be counted in lsa_barriers."""
    for p in POINTS:
        block = _split(WORKLOAD.render(p))[1]
        barriers = re.search(r"n\.lsa_barriers = ([^;]+);", block)
        if p.backend in ("gin", "nvshmem"):
            assert barriers is None and "ncclLsaBarrierSession" not in block
            continue
        value = barriers.group(1)
        if p.sync_scope == "block":
            assert "blockIdx.x);" in block and value in ("kMaxCommCtas", "ctx->sm_count")
        elif p.sync_scope in ("world", "team"):
            assert value == "1" and "barrier_kernel<<<1" in block
        else:
            assert value == "0" and "ncclLsaBarrierSession" not in block


def test_render_rejects_illegal_points():
    with pytest.raises(IllegalPointError, match="gemm-ag-gin-subset"):
        WORKLOAD.render(Directives("gin", "deferred", "world", "cta", WHOLE))
    with pytest.raises(IllegalPointError, match="signal-needs-chunks"):
        WORKLOAD.render(Directives("lsa", "stream_overlap", "signal", "warp", WHOLE))
    with pytest.raises(IllegalPointError, match="gemm-ag-nvshmem-subset"):
        WORKLOAD.render(Directives("nvshmem", "deferred", "world", "cta", WHOLE))
    with pytest.raises(IllegalPointError, match="gemm-ag-nvshmem-subset"):
        WORKLOAD.render(Directives("nvshmem", "split_put_wait", "signal", "thread", 4 << 20))


def test_check_shape():
    for s in WORKLOAD.bench_shapes + WORKLOAD.verify_shapes:
        WORKLOAD.check_shape(s, 2)
    with pytest.raises(ShapeError, match="divisible by the world size"):
        WORKLOAD.check_shape(Shape((1000, 256, 256)), 3)
    with pytest.raises(ShapeError, match="N % 128"):
        WORKLOAD.check_shape(Shape((512, 256, 100)), 2)
    with pytest.raises(ShapeError, match="3 sizes"):
        WORKLOAD.check_shape(Shape((512, 256)), 2)
    assert WORKLOAD.shapes_for(2, "verify") == list(WORKLOAD.verify_shapes)


def test_flops_and_comm_bytes():
    s = Shape((8192, 8192, 8192))
    assert WORKLOAD.flops(s, 2) == 2.0 * 8192**3
    assert WORKLOAD.comm_bytes(s, 2) == 4096 * 8192 * 2
    assert WORKLOAD.comm_bytes(s, 4) == 3 * 2048 * 8192 * 2


@pytest.mark.parametrize("world", [4, 8])
def test_larger_worlds_share_the_compiled_points_and_take_the_bench_shapes(world):
    """A candidate reads the world size at run time, so the points compiled for W = 2 (every one, in
    test_workload_contract.py::test_every_point_compiles) are the programs W = 4 and 8 run; the bench shapes
    divide at those sizes."""
    wide = WORKLOAD.space(Topology(world=world))
    assert [p.label() for p in wide.points()] == [p.label() for p in POINTS]
    for shape in WORKLOAD.bench_shapes:
        WORKLOAD.check_shape(shape, world)
    with pytest.raises(ShapeError, match=f"divisible by the world size {world}"):
        WORKLOAD.check_shape(Shape((8192 + 2, 8192, 8192)), world)


@pytest.mark.parametrize("point", [p for p in POINTS if p.issuer == "copy_engine"], ids=lambda p: p.label())
def test_overlapping_copy_engine_points_push_into_the_peers_and_wait_on_their_arrival_flags(point: Directives):
    # copy engines writing over NVLink ran 2.3-2.8x faster than reading at W = 4 (results/w4/gemm_under_copy_w4.log)
    block = _split(WORKLOAD.render(point))[1]
    reads_peers = "peer_base(st, BUF_A_LOCAL" in block
    writes_peers = "peer_base(st, BUF_A_FULL" in block
    if point.placement in ("stream_overlap", "fused"):
        assert writes_peers and not reads_peers
        assert "cuco::kit::stream_publish_epoch(side" in block and "sym_arrive(g, g.me, c)" in block
    elif point.placement == "split_put_wait":
        assert writes_peers and not reads_peers
    else:   # deferred: every rank's block copied on the GEMM's own stream, then one GEMM
        assert reads_peers and not writes_peers
