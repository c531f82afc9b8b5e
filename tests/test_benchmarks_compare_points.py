"""benchmarks/compare_points.py: per-point medians over repeats, and the points it refuses before any build."""

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import compare_points  # noqa: E402


def test_medians_per_point_and_parts_skip_untimed_repeats():
    runs = [{"host_ms": 1.0, "a_ms": 0.5, "compute_ms": 0.4, "comm_ms": 0.2},
            {"host_ms": 1.2, "a_ms": None, "compute_ms": 0.5, "comm_ms": 0.3},
            {"host_ms": 1.1, "a_ms": 0.7, "compute_ms": 0.6}]
    got = compare_points.medians(runs, ["host", "a", "b"])
    assert got == {"host": 1.1, "a": pytest.approx(0.6), "b": None, "compute": 0.5, "comm": 0.25}


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=9))
def test_a_median_lies_within_its_repeats(values):
    got = compare_points.medians([{"x_ms": v} for v in values], ["x"])["x"]
    assert min(values) <= got <= max(values)


@pytest.mark.parametrize("points,why", [("host,lsa/a", "host seed is always timed"), (" , ", "names no point"),
                                        ("seed", "host seed is always timed")])
def test_points_it_cannot_compare_are_refused_before_any_build(points, why):
    with pytest.raises(SystemExit, match=why):
        compare_points.main(["--workload", "moe", "--world", "2", "--shape", "paper-r1", "--points", points])


def test_repeats_must_be_positive():
    with pytest.raises(SystemExit, match="at least 1"):
        compare_points.main(["--workload", "moe", "--world", "2", "--shape", "p", "--points", "fastpath",
                             "--repeats", "0"])
