"""The figure of record of a program's rewrite (cuco.program.retime): rounds go on until the spread is within its
limit or the cap, medians and spread as a results row reads them. Rounds come from a scripted list (a fake
`one_round`, named as such), so the stopping rule is tested without a GPU."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from cuco.program.retime import SPREAD_LIMIT, Retimed, Round, retime, spread


def fake_rounds(times: list[tuple[float, float]]):
    """A scripted `one_round`: (host, best) region times in order, cold = 10 x warm."""
    it = iter(times)

    def one() -> Round:
        h, b = next(it)
        return Round(h, 10 * h, b, 10 * b)
    return one


def test_steady_rounds_stop_at_the_minimum():
    got = retime(fake_rounds([(1.0, 0.5)] * 9), min_runs=3, max_runs=9)
    assert len(got.rounds) == 3 and got.speedup == 2.0 and got.spread == 0.0
    row = got.to_dict()
    assert row["record_repeats"] == 3 and row["record_cold_ms"] == 10.0 and row["record_cold_best_ms"] == 5.0
    assert not row["record_spread_above_limit"]


def test_noisy_rounds_go_on_until_the_spread_settles_or_the_cap():
    # one round 10 % off keeps max - min at 10 % of the median whatever follows: the cap ends it
    noisy = [(1.0, 0.5), (1.0, 0.5), (1.1, 0.5)] + [(1.0, 0.5)] * 6
    got = retime(fake_rounds(noisy), min_runs=3, max_runs=5)
    assert len(got.rounds) == 5 and got.spread == pytest.approx(0.1)
    assert got.to_dict()["record_spread_above_limit"] and got.host_ms == 1.0


def test_a_failing_round_raises_and_bad_bounds_are_refused():
    def broken() -> Round:
        raise RuntimeError("the rewrite read back other bytes")
    with pytest.raises(RuntimeError, match="other bytes"):
        retime(broken)
    with pytest.raises(ValueError, match="min_runs <= max_runs"):
        retime(fake_rounds([]), min_runs=4, max_runs=3)
    with pytest.raises(ValueError):
        Retimed(())


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=20))
def test_spread_is_zero_for_equal_runs_and_never_negative(runs):
    assert spread(tuple(runs)) >= 0.0
    assert spread((runs[0],) * len(runs)) == 0.0


@given(st.lists(st.tuples(st.floats(0.01, 10.0), st.floats(0.01, 10.0)), min_size=1, max_size=12),
       st.integers(1, 6), st.integers(0, 6))
def test_rounds_run_never_exceed_the_cap_nor_stop_before_the_minimum(times, min_runs, extra):
    max_runs = min(min_runs + extra, len(times))
    if max_runs < min_runs:
        return
    got = retime(fake_rounds(times), min_runs, max_runs)
    assert min_runs <= len(got.rounds) <= max_runs
    assert len(got.rounds) == max_runs or got.spread <= SPREAD_LIMIT
