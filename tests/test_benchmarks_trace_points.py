"""benchmarks/trace_points.py's breakdown of a traced point: per rank and per launch, the span, compute and
communication busy time, their overlap, the span no compute covers, and the kernels by total time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import trace_points  # noqa: E402


def _event(name: str, cat: str, ts: float, dur: float, rank: int = 0) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "pid": f"rank {rank}", "tid": "stream 7", "ts": ts, "dur": dur}


def test_a_pull_under_the_gemm_then_an_exposed_combine_per_launch():
    events = []
    for launch in range(3):  # three launches 1000 us apart: pull 0-100 under gemm 50-650, combine 650-750
        t = 1000.0 * launch
        events += [_event("gather_kernel<16, false>(Geo, ...)", "communication", t, 100),
                   _event("cutlass::device_kernel<GemmKernel>(Params)", "compute", t + 50, 600),
                   _event("combine_kernel(Geo, ...)", "communication", t + 650, 100)]
    events.append(_event("gather_kernel<16, false>(Geo, ...)", "communication", 0, 50, rank=1))
    parts = trace_points.breakdown({"traceEvents": events})
    r0 = parts["rank 0"]
    assert r0["span_us"] == pytest.approx((2000 + 750) / 3)
    assert r0["compute_us"] == pytest.approx(600)
    assert r0["communication_us"] == pytest.approx(200)
    assert r0["overlap_us"] == pytest.approx(50)
    assert r0["uncovered_us"] == pytest.approx((2750 - 1800) / 3)
    assert [k["name"] for k in r0["kernels"]] == ["cutlass::device_kernel", "gather_kernel", "combine_kernel"]
    assert r0["kernels"][0] == {"name": "cutlass::device_kernel", "calls": 1, "us": pytest.approx(600)}
    assert parts["rank 1"]["compute_us"] == 0 and parts["rank 1"]["communication_us"] == pytest.approx(50 / 3)
    text = "\n".join(trace_points.lines("deferred", parts))
    assert "rank 0: span 916.7 us = compute 600.0 + uncovered 316.7; communication 200.0 (under compute 50.0)" in text


def test_events_without_a_span_are_left_out():
    events = [_event("k", "compute", 0, 10), {"ph": "X", "name": "bad", "cat": "compute", "pid": "rank 0"},
              {"ph": "M", "name": "meta"}]
    assert trace_points.breakdown({"traceEvents": events}, launches=1)["rank 0"]["compute_us"] == 10


spans = st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 1e3), st.booleans()), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(spans)
def test_the_parts_of_a_span_add_up(items):
    events = [_event("k", "communication" if comm else "compute", t, d) for t, d, comm in items]
    p = trace_points.breakdown({"traceEvents": events}, launches=1)["rank 0"]
    assert p["compute_us"] + p["uncovered_us"] == pytest.approx(p["span_us"], abs=1e-6)
    assert 0 <= p["overlap_us"] <= min(p["compute_us"], p["communication_us"]) + 1e-6
    assert p["communication_us"] <= p["span_us"] + 1e-6


def test_the_script_refuses_no_points_before_touching_a_gpu(tmp_path):
    with pytest.raises(SystemExit):
        trace_points.main(["--workload", "moe", "--world", "2", "--shape", "paper-r1", "--points", " , ",
                           "--out", str(tmp_path)])
