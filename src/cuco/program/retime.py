"""The figure of record of a rewrite against its program (docs/measuring.md): interleaved rounds, each the
original and then the rewrite as fresh processes, until at least `min_runs` rounds are in and both sides' spread
is within `spread_limit`, or every one of at least UNANIMOUS_RUNS rounds agrees on the faster side, or `max_runs`
rounds ran. The search's timed rounds rank candidates; these figures are
the ones a results file states."""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable

import attrs

#: A figure's largest (max - min) / median over its rounds before more rounds stop being run (docs/measuring.md).
SPREAD_LIMIT = 0.03
#: The largest one-sided sign-test p-value at which rounds whose spread stays above SPREAD_LIMIT still show the
#: rewrite faster (e.g. 8 of 9 rounds: p = 0.020; 7 of 9: p = 0.090, not enough).
SIGN_P_LIMIT = 0.05


def sign_p(wins: int, rounds: int) -> float:
    """P(at least `wins` of `rounds` fair coin flips): the one-sided sign test of a side being faster in `wins`
    of `rounds` paired rounds, where either side is as likely to win each."""
    if not 0 <= wins <= rounds:
        raise ValueError(f"need 0 <= wins <= rounds, got wins={wins}, rounds={rounds}")
    return sum(math.comb(rounds, k) for k in range(wins, rounds + 1)) / 2 ** rounds


def spread(runs_ms: tuple[float, ...]) -> float:
    """(max - min) / median of one side's rounds; 0 for fewer than two or a zero median."""
    if len(runs_ms) < 2:
        return 0.0
    mid = statistics.median(runs_ms)
    return (max(runs_ms) - min(runs_ms)) / mid if mid else 0.0


@attrs.frozen
class Round:
    """One interleaved round: the original's and the rewrite's region time (warm median) and cold first region."""

    host_ms: float
    host_cold_ms: float
    best_ms: float
    best_cold_ms: float


@attrs.frozen
class Retimed:
    """The rounds of a figure of record and what a results row reads from them (medians, spread, repeats)."""

    rounds: tuple[Round, ...] = attrs.field(validator=attrs.validators.min_len(1))
    spread_limit: float = SPREAD_LIMIT

    def _side(self, name: str) -> tuple[float, ...]:
        return tuple(getattr(r, name) for r in self.rounds)

    @property
    def host_ms(self) -> float:
        """The original's median region time over the rounds."""
        return statistics.median(self._side("host_ms"))

    @property
    def best_ms(self) -> float:
        """The rewrite's median region time over the rounds."""
        return statistics.median(self._side("best_ms"))

    @property
    def speedup(self) -> float:
        """host_ms / best_ms: above 1, the rewrite is faster."""
        return self.host_ms / self.best_ms

    @property
    def spread(self) -> float:
        """The larger of the two sides' spreads."""
        return max(spread(self._side("host_ms")), spread(self._side("best_ms")))

    @property
    def rounds_faster(self) -> int:
        """The rounds in which the rewrite's region was faster than the original's (the pair run side by side)."""
        return sum(r.best_ms < r.host_ms for r in self.rounds)

    @property
    def faster(self) -> bool:
        """Whether these rounds show the rewrite faster: a median speedup above 1 with both sides' spreads within
        the limit, or, where they are not, the rewrite faster in enough paired rounds that chance alone would
        give that seldom (sign test, p <= SIGN_P_LIMIT): noise between processes moves both sides of a round."""
        if self.speedup <= 1.0:
            return False
        return self.spread <= self.spread_limit or sign_p(self.rounds_faster, len(self.rounds)) <= SIGN_P_LIMIT

    def to_dict(self) -> dict[str, Any]:
        """The fields a results row takes (`record_*`), the rounds included."""
        return {"record_host_ms": self.host_ms, "record_best_ms": self.best_ms, "record_speedup": self.speedup,
                "record_cold_ms": statistics.median(self._side("host_cold_ms")),
                "record_cold_best_ms": statistics.median(self._side("best_cold_ms")),
                "record_spread": self.spread, "record_repeats": len(self.rounds),
                "record_spread_above_limit": self.spread > self.spread_limit,
                "record_rounds_faster": self.rounds_faster,
                "record_sign_p": sign_p(self.rounds_faster, len(self.rounds)), "record_faster": self.faster,
                "record_host_runs_ms": list(self._side("host_ms")),
                "record_best_runs_ms": list(self._side("best_ms"))}


#: Rounds after which noisy rounds that all agree (the rewrite faster in every one, or in none) settle the figure:
#: a unanimous 6 of 6 would come by chance with p = 2 * 2**-6 = 0.031 either way.
UNANIMOUS_RUNS = 6


def retime(one_round: Callable[[], Round], min_runs: int = 3, max_runs: int = 9,
           spread_limit: float = SPREAD_LIMIT) -> Retimed:
    """Rounds from `one_round` (which raises where a run fails or reads back wrong bytes) until `min_runs` are in
    and the spread is within `spread_limit`, or, past UNANIMOUS_RUNS rounds, every round agrees on which side is
    faster, or `max_runs` rounds ran."""
    if not 1 <= min_runs <= max_runs:
        raise ValueError(f"need 1 <= min_runs <= max_runs, got min_runs={min_runs}, max_runs={max_runs}")
    rounds: list[Round] = []
    while len(rounds) < max_runs:
        rounds.append(one_round())
        got = Retimed(tuple(rounds), spread_limit)
        if len(rounds) >= min_runs and got.spread <= spread_limit:
            return got
        if len(rounds) >= max(min_runs, UNANIMOUS_RUNS) and got.rounds_faster in (0, len(rounds)):
            return got
    return Retimed(tuple(rounds), spread_limit)
