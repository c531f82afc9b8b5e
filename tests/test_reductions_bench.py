"""benchmarks/reductions_vs_nccl.py: the sweep program is one the fast path rewrites whole (every reduction it
times becomes device-initiated), and the table's bus bandwidths follow nccl-tests' definitions."""

from __future__ import annotations

import pytest
from bench_scripts import bench_module


@pytest.fixture(scope="module")
def bench():
    return bench_module("reductions_vs_nccl")


def test_the_fast_path_rewrites_every_reduction_of_the_sweep(bench):
    from cuco.fastpath.analyze import analyze
    from cuco.fastpath.transform import transform

    text = bench.PROGRAM.read_text()
    out = transform(analyze(text, bench.PROGRAM.name), text)
    assert "ncclAllReduce(" not in out.code and "ncclReduceScatter(" not in out.code and "ncclReduce(" not in out.code
    assert {r.split("@")[0] for r in out.rules_applied} == {"lsa-allreduce-rs-ag", "lsa-reducescatter-pull",
                                                             "lsa-reduce-slices"}


def test_bus_bandwidth_follows_nccl_tests_and_the_ratio_is_nccl_time_over_the_fastest_cuco_time(bench):
    nccl = [({("allreduce", 1 << 20): 0.010, ("reduce", 1 << 20): 0.008}, {"allreduce": 0}, {}),
            ({("allreduce", 1 << 20): 0.012, ("reduce", 1 << 20): 0.008}, {"allreduce": 0}, {})]
    cuco = {"one_shot": [({("allreduce", 1 << 20): 0.011}, {}, {}), ({("allreduce", 1 << 20): 0.011}, {}, {})],
            "two_shot": [({("allreduce", 1 << 20): 0.022}, {}, {}), ({("allreduce", 1 << 20): 0.022}, {}, {})]}
    table = bench.rows(4, nccl, cuco)
    ar, red = table
    assert ar["collective"] == "allreduce" and ar["nccl_ms"] == pytest.approx(0.011)
    assert ar["nccl_busbw_gbps"] == pytest.approx((1 << 20) / 0.011 / 1e6 * 1.5)   # 2(W-1)/W at W = 4
    assert ar["cuco_best"] == "one_shot" and ar["ratio"] == pytest.approx(1.0)
    assert ar["two_shot"]["ratio"] == pytest.approx(0.5) and ar["spread"] == pytest.approx(0.002 / 0.011)
    assert red["nccl_busbw_gbps"] == pytest.approx((1 << 20) / 0.008 / 1e6) and "cuco_ms" not in red
    md = bench.markdown({"world": 4, "device": "X", "nccl": "2.28.9", "date": "d", "algos": ["one_shot", "two_shot"],
                         "wrong": {"nccl": [0], "one_shot": [0], "two_shot": [0]}}, table)
    assert "| allreduce | 1 MiB | 11.0 |" in md and "| reduce | 1 MiB | 8.0 | 131.1 | - | - | - | - | - |" in md


def test_parse_reads_times_host_times_and_wrong_counts(bench):
    times, wrong, host = bench.parse("time allreduce 1048576 0.0123\nhost allreduce 1048576 0.0101\n"
                                     "wrong allreduce 0\nworld 2\nnoise\n")
    assert times == {("allreduce", 1048576): 0.0123} and wrong == {"allreduce": 0}
    assert host == {("allreduce", 1048576): 0.0101}


def test_host_enqueue_times_reach_the_rows_and_a_table_of_their_own(bench):
    key = ("allreduce", 64 << 10)
    nccl = [({key: 0.011}, {}, {key: 0.004}), ({key: 0.012}, {}, {key: 0.006})]
    cuco = {"push": [({key: 0.018}, {}, {key: 0.017})]}
    (row,) = bench.rows(4, nccl, cuco)
    assert row["nccl_host_ms"] == pytest.approx(0.005) and row["push"]["host_ms"] == pytest.approx(0.017)
    md = bench.markdown({"world": 4, "device": "X", "nccl": "2.28.9", "date": "d", "algos": ["push"],
                         "wrong": {"nccl": [0], "push": [0]}}, [row])
    assert "| allreduce | 64 KiB | 11.5 |" in md and "| allreduce | 64 KiB | 5.0 | 17.0 |" in md


def test_sizes_are_labelled_in_their_largest_whole_unit(bench):
    assert [bench.size_label(b) for b in (64 << 10, 256 << 10, 1 << 20, 256 << 20, 1 << 30)] == \
        ["64 KiB", "256 KiB", "1 MiB", "256 MiB", "1 GiB"]
