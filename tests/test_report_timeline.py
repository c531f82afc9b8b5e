"""Timelines: the harness's CUPTI records become a Chrome trace with compute and communication apart, the
overlap is measured from it, and (GPU) a traced harness run of a real candidate records its kernels per rank."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuco.report.timeline import classify, overlap_us, to_chrome_trace, union_spans


def _rec(name, kind, start, end, device=0, stream=7, peer=False):
    return {"name": name, "kind": kind, "device": device, "stream": stream, "start_ns": start, "end_ns": end,
            "bytes": 64, "peer": peer}


def test_classification():
    assert classify(_rec("cutlass::device_kernel<GemmKernel>", "kernel", 0, 1)) == "compute"
    assert classify(_rec("cuco_ag::pull_kernel(ncclDevComm)", "kernel", 0, 1)) == "communication"
    assert classify(_rec("ncclDevKernel_AllGather_RING_LL", "kernel", 0, 1)) == "communication"
    assert classify(_rec("memcpy PtoP", "memcpy", 0, 1, peer=True)) == "communication"
    assert classify(_rec("memset", "memset", 0, 1)) == "other"


def test_a_harness_trace_becomes_lanes_per_rank_and_stream(tmp_path):
    f = tmp_path / "candidate0.json"
    f.write_text(json.dumps({"devices": {"0": 0, "1": 1}, "records": [
        _rec("gemm", "kernel", 1_000, 901_000, device=0, stream=7),
        _rec("pull_kernel", "kernel", 51_000, 351_000, device=0, stream=9),
        _rec("gemm", "kernel", 2_000, 902_000, device=1, stream=7)]}))
    trace = to_chrome_trace([f], "t")
    ev = trace["traceEvents"]
    assert {e["pid"] for e in ev} == {"rank 0", "rank 1"}
    assert min(e["ts"] for e in ev) == 0.0  # relative to the first record, in µs
    pull = next(e for e in ev if e["name"] == "pull_kernel")
    assert pull["cat"] == "communication" and pull["tid"] == "stream 9" and pull["dur"] == 300.0
    assert overlap_us(trace) == pytest.approx(300.0)  # the pull runs entirely under rank 0's GEMM


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 5_000), st.booleans()), max_size=30))
def test_overlap_is_bounded_by_either_side(spans):
    events = [{"ph": "X", "name": "k", "cat": "communication" if comm else "compute", "pid": "rank 0",
               "tid": "s", "ts": float(t), "dur": float(d)} for t, d, comm in spans]
    trace = {"traceEvents": events}
    busy = lambda cat: sum(e - s for s, e in union_spans(  # noqa: E731
        [(ev["ts"], ev["ts"] + ev["dur"]) for ev in events if ev["cat"] == cat]))
    assert 0.0 <= overlap_us(trace) <= min(busy("compute"), busy("communication")) + 1e-6


@pytest.mark.gpu
def test_a_traced_harness_run_records_each_ranks_kernels(tmp_path, gpus):
    """The GEMM+AllGather host seed and a stream_overlap point, traced: kernels per rank, GEMM as compute,
    the gather or pull as communication; tracing leaves the candidates' statuses ok."""
    from cuco import workloads
    from cuco.design_space import Directives
    from cuco.evaluate.compile import Compiler
    from cuco.harness import HarnessRequest, build_shared, run_harness
    from cuco.kit.compute import link_options
    from cuco.toolchain import default_toolchain

    world = min(2, gpus)
    wl = workloads.get("gemm_allgather")
    link = link_options(wl, default_toolchain())
    plugin = build_shared(wl.plugin_path(), link.libraries, include_dirs=link.include_dirs, extra=link.extra)
    codes = [wl.seed_code(), wl.render(Directives.from_label("lsa/stream_overlap/signal/cta/4MiB"))]
    outs = Compiler().compile_many(codes, link.libraries, link.include_dirs, link.extra)
    assert all(o.ok for o in outs)
    res = run_harness(HarnessRequest(plugin, [o.so_path for o in outs], (4096, 4096, 4096), world=world,
                                     verify=False, bench=True, iters=5, trace_dir=tmp_path))
    assert [c.status for c in res.candidates] == ["ok", "ok"], [(c.status, c.message) for c in res.candidates]
    for i in range(2):
        trace = to_chrome_trace([tmp_path / f"candidate{i}.json"], f"candidate {i}")
        ev = trace["traceEvents"]
        assert {e["pid"] for e in ev} == {f"rank {r}" for r in range(world)}, {e["pid"] for e in ev}
        assert any(e["cat"] == "compute" for e in ev)
        if world > 1:
            assert any(e["cat"] == "communication" for e in ev)
        print(f"candidate {i}: {len(ev)} events, overlap {overlap_us(trace):.0f} us",
              sorted({e["name"][:60] for e in ev})[:8])
