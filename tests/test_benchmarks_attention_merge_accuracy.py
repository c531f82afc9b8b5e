"""benchmarks/attention_merge_accuracy.py without a GPU: the error it reads from the check messages, the bound it
judges against, and its table."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import attention_merge_accuracy as acc  # noqa: E402

MSG = ("PASS: 512 sampled rows x 8 heads: O rel_l2=0.00312 (< 0.01), 0 outside 0.03|ref| + 0.03 rms, nan/inf=0; LSE "
       "worst |d|=9.54e-07, 0 outside 1e-03 + 1e-04|ref|; max|O-ref|/max|ref|={}")


def test_the_largest_error_of_every_rank_and_seed_is_read():
    assert acc.rel_max_of([MSG.format("0.00195"), MSG.format("0.0039"), "no figure here"]) == 0.0039
    assert acc.rel_max_of(["rank 0: seed 1: a message without the figure"]) is None


@given(st.floats(1e-5, 0.1), st.floats(1e-5, 0.2))
def test_within_means_every_larger_world_is_under_twice_w1_or_the_floor(w1, w4):
    v = acc.judge({"p": {1: w1, 2: w1, 4: w4}})["p"]
    assert v["bound"] == max(2 * w1, 2 ** -8)
    assert v["within"] == (w4 <= max(2 * w1, 2 ** -8))


def test_a_point_that_did_not_verify_at_some_world_is_not_within_and_shows_a_dash():
    table = {"host": {1: 0.002, 2: 0.003, 4: None}}
    assert acc.judge(table)["host"]["within"] is False
    md = acc.render("8192,8,2,128,1", table, [1, 2, 4], "GPU")
    assert "| `host` | 0.002 | 0.003 | — | 0.004 | False |" in md
