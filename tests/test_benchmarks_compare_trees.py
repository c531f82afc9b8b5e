"""benchmarks/compare_trees.py: rounds alternate the two trees (reversed every other round), the summary's
medians and per-round ratios, and the arguments it refuses before any build."""

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import compare_trees  # noqa: E402


def _row(**ms):
    return {"medians_ms": ms, "statuses": {k: "ok" for k in ms}, "exit": 0}


def test_rounds_alternate_and_reverse_every_other_round():
    calls = []

    def test_double_round(tree, other, args):  # stands in for a compare_points process (unit test only)
        calls.append(tree)
        return _row(host=1.0, a=0.8 if tree == "this" else 0.6)

    result = compare_trees.compare(4, Path("/elsewhere"), ["--workload", "moe"], run=test_double_round)
    assert calls == ["this", "other", "other", "this", "this", "other", "other", "this"]
    assert result["medians_ms"]["this"] == {"host": 1.0, "a": 0.8}
    assert result["other_over_this"]["a"] == pytest.approx(0.75)
    assert result["failed"] == []


def test_ratios_are_per_round_and_skip_rounds_that_did_not_time_a_point():
    rows = {"this": [_row(a=1.0), _row(a=2.0), _row(a=None)], "other": [_row(a=0.5), _row(a=3.0), _row(a=1.0)]}
    got = compare_trees.summarise(rows)
    assert got["other_over_this"]["a"] == pytest.approx((0.5 + 1.5) / 2)
    assert got["medians_ms"]["this"]["a"] == pytest.approx(1.5)
    assert got["medians_ms"]["other"]["a"] == pytest.approx(1.0)


@given(st.lists(st.tuples(st.floats(0.01, 10.0), st.floats(0.01, 10.0)), min_size=1, max_size=7))
def test_a_ratio_lies_within_the_rounds_ratios(pairs):
    rows = {"this": [_row(a=t) for t, _ in pairs], "other": [_row(a=o) for _, o in pairs]}
    got = compare_trees.summarise(rows)["other_over_this"]["a"]
    ratios = [o / t for t, o in pairs]
    assert min(ratios) - 1e-9 <= got <= max(ratios) + 1e-9


def test_a_failed_round_is_named():
    def test_double_round(tree, other, args):  # unit test only
        row = _row(host=1.0)
        row["exit"] = 1 if tree == "other" else 0
        return row

    result = compare_trees.compare(1, Path("/elsewhere"), [], run=test_double_round)
    assert result["failed"] == [("other", 1, {"host": "ok"})]


def test_it_refuses_arguments_it_cannot_use_before_any_build(tmp_path):
    with pytest.raises(SystemExit, match="after --"):
        compare_trees.main(["--other", str(tmp_path)])
    with pytest.raises(SystemExit, match="no src/ or csrc/"):
        compare_trees.main(["--other", str(tmp_path), "--", "--workload", "moe"])
    (tmp_path / "src").mkdir(), (tmp_path / "csrc").mkdir()
    with pytest.raises(SystemExit, match="at least 1"):
        compare_trees.main(["--other", str(tmp_path), "--rounds", "0", "--", "--workload", "moe"])
