"""benchmarks/reductions_vs_nccl.py: the sweep program is one the fast path rewrites whole (every reduction it
times becomes device-initiated), the table's bus bandwidths follow nccl-tests' definitions, and --ctas builds one
column per AllReduce algorithm and CTA count."""

from __future__ import annotations

import argparse
import re
from importlib import resources

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


def test_ctas_are_parsed_once_each_in_order_and_must_be_positive(bench):
    assert bench.parse_ctas("32") == [32] and bench.parse_ctas(" 64,32, 128,64,") == [64, 32, 128]
    for bad in ("", "0", "-8", "32,x", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.parse_ctas(bad)


def test_each_algorithm_at_each_cta_count_is_a_column_and_32_keeps_the_algorithms_name(bench):
    sides = bench.variants(["auto", "push"], [32, 64, 128])
    assert list(sides) == ["auto", "auto@64", "auto@128", "push", "push@64", "push@128"]
    assert sides["push@128"] == ("push", 128) and sides["auto"] == ("auto", 32)
    assert list(bench.variants(["two_shot"], [64])) == ["two_shot@64"]
    # the fast path's default CTA count is the one a column without @N was built with
    point = resources.files("cuco.fastpath").joinpath("cuda", "lsa_point.cuh").read_text()
    assert re.search(r"#define CUCOFP_COMM_CTAS (\d+)", point).group(1) == str(bench.BASE_CTAS)


def test_a_variant_sets_the_ctas_ahead_of_the_rewrite_only_where_they_are_not_the_default(bench):
    rewrite = "int main() {}\n"
    default = bench.variant_source(rewrite, "push", bench.BASE_CTAS)
    assert default == "#define CUCOFP_ALLREDUCE 3  // push\n#define CUCOFP_REDUCESCATTER 2  // push\n" + rewrite
    wide = bench.variant_source(rewrite, "two_shot", 128)
    assert wide.startswith("#define CUCOFP_ALLREDUCE 2  // two_shot\n#define CUCOFP_REDUCESCATTER 1  // barrier\n"
                           "#define CUCOFP_COMM_CTAS 128") and wide.endswith(rewrite)


def test_cta_columns_are_labelled_in_the_table_and_named_in_its_note(bench):
    key = ("reducescatter", 1 << 20)
    nccl = [({key: 0.012}, {}, {})]
    cuco = {"push": [({key: 0.018}, {}, {})], "push@128": [({key: 0.010}, {}, {})]}
    (row,) = bench.rows(4, nccl, cuco)
    assert row["cuco_best"] == "push@128" and row["ratio"] == pytest.approx(1.2)
    meta = {"world": 4, "device": "X", "nccl": "2.28.9", "date": "d", "algos": ["push", "push@128"],
            "wrong": {"nccl": [0], "push": [0], "push@128": [0]}}
    md = bench.markdown(meta, [row])
    assert "| push µs | push GB/s | push@128 µs | push@128 GB/s |" in md and "| 18.0 |" in md and "| 10.0 |" in md
    assert "`algorithm@N`: the rewrite with N CTAs" in md
    assert "algorithm@N" not in bench.markdown({**meta, "algos": ["push"]}, [row])
