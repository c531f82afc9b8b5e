"""The figure of record of a program's rewrite (cuco.program.retime): rounds go on until the spread is within its
limit or the cap, medians and spread as a results row reads them. Rounds come from a scripted list (a fake
`one_round`, named as such), so the stopping rule is tested without a GPU."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from cuco.program.retime import SPREAD_LIMIT, UNANIMOUS_RUNS, Retimed, Round, retime, sign_p, spread


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
    unanimous = len(got.rounds) >= UNANIMOUS_RUNS and got.rounds_faster in (0, len(got.rounds))
    assert len(got.rounds) == max_runs or got.spread <= SPREAD_LIMIT or unanimous


def test_the_sign_test_has_its_textbook_values():
    assert sign_p(0, 9) == 1.0
    assert sign_p(9, 9) == pytest.approx(1 / 512)
    assert sign_p(8, 9) == pytest.approx(10 / 512)     # 0.0195: significant at 0.05
    assert sign_p(7, 9) == pytest.approx(46 / 512)     # 0.0898: not
    assert sign_p(3, 3) == 0.125
    with pytest.raises(ValueError, match="wins <= rounds"):
        sign_p(4, 3)


@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_the_sign_test_falls_as_wins_grow_and_stays_a_probability(n_k):
    n, k = n_k
    assert 0.0 < sign_p(k + 1, n) < sign_p(k, n) <= 1.0


def test_noisy_rounds_count_as_faster_only_where_most_pairs_agree():
    # 9 rounds, both sides 20 % noisy (spread far above the limit), rewrite faster in 8 of 9: faster (p = 0.020)
    host = [1.0, 1.2, 0.9, 1.1, 1.0, 1.15, 0.95, 1.05, 1.1]
    best = [0.9, 1.1, 0.95, 1.0, 0.92, 1.0, 0.9, 0.97, 1.0]
    got = retime(fake_rounds(list(zip(host, best))), min_runs=3, max_runs=9)
    assert got.spread > SPREAD_LIMIT and got.rounds_faster == 8 and got.speedup > 1.0 and got.faster
    assert got.to_dict()["record_faster"] and got.to_dict()["record_sign_p"] == pytest.approx(10 / 512)
    # a median speedup above 1 still, but the rewrite faster in only 5 of 9 rounds: not shown faster (p = 0.5)
    best_mixed = [0.9, 1.25, 0.95, 1.15, 0.92, 1.0, 0.9, 0.97, 1.2]
    mixed = retime(fake_rounds(list(zip(host, best_mixed))), min_runs=3, max_runs=9)
    assert mixed.speedup > 1.0 and mixed.rounds_faster == 5 and not mixed.faster


def test_steady_rounds_need_no_sign_test_and_a_slower_rewrite_is_never_faster():
    steady = retime(fake_rounds([(1.0, 0.98)] * 3), min_runs=3, max_runs=9)
    assert steady.spread == 0.0 and steady.faster                    # 3 of 3 alone would be p = 0.125
    slower = retime(fake_rounds([(1.0, 1.2), (1.0, 0.5), (1.0, 1.3)]), min_runs=3, max_runs=3)
    assert slower.speedup < 1.0 and not slower.faster


def test_noisy_rounds_that_all_agree_stop_after_six():
    # 20 % noise on both sides, the rewrite faster in every round: settled after 6 rounds (p = 1/64), not 9
    host = [1.0, 1.2, 0.9, 1.1, 1.0, 1.15, 0.95, 1.05, 1.1]
    got = retime(fake_rounds([(h, 0.8 * h) for h in host]), min_runs=3, max_runs=9)
    assert len(got.rounds) == UNANIMOUS_RUNS == 6 and got.spread > SPREAD_LIMIT and got.faster
    slower = retime(fake_rounds([(h, 1.25 * h) for h in host]), min_runs=3, max_runs=9)
    assert len(slower.rounds) == 6 and slower.rounds_faster == 0 and not slower.faster
