"""Seeded top-k routing with expert-load skew, bit-identical to the plugin's C++ side (routing.h).

Per source rank: T tokens pick K distinct experts of E. Expert 0 receives R times the token slots of each other
expert (R = 1: uniform): with S = T*K slots and weights (R, 1, ..., 1), expert 0 gets floor(S*R/(R+E-1)) slots,
every other expert floor(S/(R+E-1)), and the remainder goes one slot each to the first other experts. Which
other expert gets which count, which tokens pick which experts and the gate weights are seeded random: the
other experts' labels and the tokens are permuted by seeded Fisher-Yates shuffles. A token's K gates are
positive and sum to 1 (normalised over its top-k, as DeepSeek-V3 does).
"""

from __future__ import annotations

import attrs
import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
RANK_MUL = 0xD1B54A32D192ED03
INDEX_MUL = 0xBF58476D1CE4E5B9
STREAM_LABELS, STREAM_TOKENS, STREAM_GATES = 1, 2, 3


class RoutingError(ValueError):
    """Routing parameters that cannot be satisfied; the message names the constraint."""


def splitmix64(x: int) -> int:
    """SplitMix64's output for state `x` (the same function as routing.h's, bit for bit)."""
    x = (x + GOLDEN) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def stream_key(seed: int, rank: int, stream: int) -> int:
    """The key of one random stream of `rank` under `seed`."""
    return splitmix64((seed * GOLDEN + rank * RANK_MUL + stream) & MASK)


def rnd(key: int, i: int) -> int:
    """The `i`-th 64-bit random number of stream `key`."""
    return splitmix64(key ^ ((i * INDEX_MUL) & MASK))


def shuffle(n: int, key: int) -> list[int]:
    """Fisher-Yates permutation of range(n) driven by rnd(key, i)."""
    a = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rnd(key, i) % (i + 1)
        a[i], a[j] = a[j], a[i]
    return a


@attrs.frozen
class RoutingSpec:
    """T tokens per rank, top-K of E experts, skew R (expert 0 gets R times each other expert's slots)."""

    tokens: int
    experts: int
    topk: int
    skew: int

    def __attrs_post_init__(self) -> None:
        check(self.tokens, self.experts, self.topk, self.skew)

    @property
    def slots(self) -> int:
        """Routed slots: tokens times top-k."""
        return self.tokens * self.topk

    def counts(self) -> list[int]:
        """Slots per expert index before the label shuffle (index 0 is expert 0)."""
        return slot_counts(self.tokens, self.experts, self.topk, self.skew)


def check(tokens: int, experts: int, topk: int, skew: int) -> None:
    """Raise RoutingError naming the violated constraint."""
    if tokens < 1:
        raise RoutingError(f"T (tokens per rank) must be >= 1, got {tokens}")
    if experts < 1:
        raise RoutingError(f"E (experts) must be >= 1, got {experts}")
    if not 1 <= topk <= experts:
        raise RoutingError(f"top-k must be between 1 and E={experts} (a token picks distinct experts), got {topk}")
    if skew < 1:
        raise RoutingError(f"skew r must be >= 1 (expert 0 gets r times the slots of each other expert), got {skew}")
    c = slot_counts(tokens, experts, topk, skew)
    if max(c) > tokens:
        raise RoutingError(
            f"skew r={skew} with top-k={topk} gives expert 0 {c[0]} slots but only T={tokens} tokens can pick it "
            f"(once each): need top-k*r <= r+E-1, i.e. a smaller r or top-k, or more experts")


def slot_counts(tokens: int, experts: int, topk: int, skew: int) -> list[int]:
    """Slots per expert when expert 0 gets `skew` times the slots of each other expert; the remainder goes one each to experts 1, 2, ..."""
    slots = tokens * topk
    total = skew + experts - 1
    other = slots // total
    counts = [slots * skew // total] + [other] * (experts - 1)
    for e in range(1, 1 + slots - sum(counts)):
        counts[e] += 1
    return counts


def route(spec: RoutingSpec, seed: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(experts [T, K] int32, gates [T, K] float32) of source rank `rank` for `seed`."""
    t, k, e = spec.tokens, spec.topk, spec.experts
    counts = spec.counts()
    perm = shuffle(e - 1, stream_key(seed, rank, STREAM_LABELS))
    labels = [0] + [1 + p for p in perm]            # count index -> expert label
    sequence = np.repeat(np.asarray(labels, dtype=np.int32), counts)
    table = sequence.reshape(k, t).T                # column-major fill: a run of <= T slots hits distinct tokens
    order = np.asarray(shuffle(t, stream_key(seed, rank, STREAM_TOKENS)), dtype=np.int64)
    experts = np.empty((t, k), dtype=np.int32)
    experts[order] = table                          # token i of the table becomes token order[i]
    gkey = stream_key(seed, rank, STREAM_GATES)
    u = np.empty((t, k), dtype=np.float32)
    for i in range(t * k):
        u.flat[i] = np.float32(0.5) + np.float32((rnd(gkey, i) >> 40) / float(1 << 24))
    total = u[:, 0].copy()
    for j in range(1, k):                           # sequential float32 sum, as the C++ side does
        total = (total + u[:, j]).astype(np.float32)
    gates = (u / total[:, None]).astype(np.float32)
    return experts, gates


def owner(expert: int, experts: int, world: int) -> int:
    """Rank that holds `expert`: experts are spread evenly, E/W consecutive ones per rank."""
    return expert // (experts // world)


def received_counts(spec: RoutingSpec, seed: int, world: int) -> np.ndarray:
    """[W, E] slots per (source rank, expert) for `seed`: what the counts exchange moves."""
    out = np.zeros((world, spec.experts), dtype=np.int64)
    for p in range(world):
        ex, _ = route(spec, seed, p)
        out[p] = np.bincount(ex.ravel(), minlength=spec.experts)
    return out
