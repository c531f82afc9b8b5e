"""KV-transfer design space and rendering: the workload's rules, the point's constants in the block, the
transfer-path variant the benchmark times, and the fixtures (legal candidates that only verification can catch)."""

from __future__ import annotations

import pytest

from cuco.design_space import Directives, IllegalPointError, Topology
from cuco.evaluate.static import check_static
from cuco.kit.evolve import split
from cuco.workloads import get
from cuco.workloads.kv_transfer import fixtures, render_transfer_path

WL = get("kv_transfer")
SPACE = WL.space(Topology(world=2))


@pytest.mark.parametrize("label, rule", [
    ("lsa/fused/signal/warp/whole", "kv-chunks"),
    ("lsa/stream_overlap/world/cta/1MiB", "kv-chunks"),
    ("lsa/split_put_wait/world/copy_engine/whole", "kv-copy-engine"),
    ("lsa/stream_overlap/signal/copy_engine/whole", "kv-copy-engine"),
    ("gin/stream_overlap/signal/warp/whole", "kv-gin-subset"),
    ("lsa/fused/signal/thread/1MiB", "fused-no-thread-issuer"),
])
def test_rules_refuse_points_no_template_covers(label, rule):
    reason = SPACE.check(Directives.from_label(label))
    assert reason and rule in reason, reason
    with pytest.raises(IllegalPointError):
        WL.render(Directives.from_label(label))


def test_space_covers_every_placement_and_issuer():
    points = list(SPACE.points())
    assert {p.placement for p in points} == {"deferred", "stream_overlap", "split_put_wait", "fused"}
    assert {p.issuer for p in points} == {"thread", "warp", "cta", "copy_engine"}
    assert {p.backend for p in points} == {"lsa", "gin"}
    assert {p.backend for p in WL.space(Topology(world=2, gin_available=False)).points()} == {"lsa"}


@pytest.mark.parametrize("label, wanted", [
    ("lsa/fused/signal/warp/1MiB", ["kGroup = 32", "kChunkBytes = 1048576", "cuco_kvt_project_kv_rows",
                                    "const int sms = 0;", "kCommCtas, ss);", "mark_ready(st, c, cs)",
                                    "after_ready(st, c, ss)", "f.arrived(l, c)"]),
    ("lsa/stream_overlap/world/copy_engine/whole", ["copy_engine_rows", "barrier(ctx, cs)", "n.lsa_barriers = 1"]),
    ("lsa/split_put_wait/signal/cta/256KiB", ["wait_own(ctx, st, f.arrived(l, c)", "f.done()", "kGroup = 0"]),
    ("gin/split_put_wait/signal/cta/whole", ["gin.put(", "n.gin_required = 1", "ncclCoopCta"]),
])
def test_the_block_holds_the_points_mechanism(label, wanted):
    block = split(WL.render(Directives.from_label(label)))[1]
    missing = [w for w in wanted if w not in block]
    assert not missing, missing


def test_lsa_points_order_the_prefills_streams_by_events_and_plan_every_sm():
    # a kernel waiting between the two streams of one GPU held an SM through every layer it waited on, and a plan
    # keeping kCommCtas SMs free gave them up for the whole stack: 3-8 % at W = 1 (benchmarks/results/kv_gemm_sms/)
    for point in SPACE.points():
        if point.backend != "lsa":
            continue
        block = split(WL.render(point))[1]
        assert "stream_wait_epoch" not in block and "stream_set_epoch" not in block, point.label()
        assert "const int sms = 0;" in block, point.label()
        if "after_ready(" in block:
            assert "mark_ready(" in block, point.label()


def test_the_transfer_path_variant_only_switches_compute_off():
    p = Directives.from_label("lsa/split_put_wait/signal/warp/1MiB")
    code, path = WL.render(p), render_transfer_path(p)
    assert path.replace("kCompute = false", "kCompute = true") == code
    assert check_static(path, parent_code=code).passed


@pytest.mark.parametrize("name", list(fixtures.FIXTURES))
def test_fixtures_are_legal_candidates(name):
    code = fixtures.FIXTURES[name]()
    base = WL.render(Directives.from_label(fixtures.STAGED if name == "never waits" else fixtures.DIRECT))
    assert code != base
    assert check_static(code, parent_code=base).passed
