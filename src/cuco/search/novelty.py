"""Novelty filter: reject a child whose evolve blocks are near-copies of already evaluated ones.

Offline it compares normalised-token 4-gram sets (Jaccard); optionally an embedding model (litellm.embedding)
gives cosine similarity instead. A directive-mutator child at an unevaluated point is always novel.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Callable, Sequence

import attrs

from cuco.candidate import Candidate
from cuco.search import blocks as blk

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?[a-zA-Z]*|\S")
DIRECTIVE_MUTATIONS = ("directive", "directive_cross")


def tokens(code: str) -> list[str]:
    """Tokens of code with comments and layout removed."""
    return _TOKEN.findall(_COMMENT.sub(" ", code))


def ngrams(toks: Sequence[str], n: int) -> frozenset[tuple[str, ...]]:
    """The set of `n`-grams of `toks` (the whole sequence as one when it is shorter than `n`)."""
    if len(toks) < n:
        return frozenset({tuple(toks)}) if toks else frozenset()
    return frozenset(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    """The Jaccard similarity of two sets (1.0 when both are empty)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@attrs.frozen
class EmbeddingSimilarity:
    """Cosine similarity of embeddings from `model` (any litellm embedding model); `embed` overrides the call."""

    model: str
    embed: Callable[[list[str]], list[list[float]]] | None = attrs.field(default=None, eq=False)
    _cache: dict = attrs.field(factory=dict, eq=False, repr=False)

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self._cache))
        if missing:
            for t, v in zip(missing, self._call(missing)):
                self._cache[hashlib.sha256(t.encode()).hexdigest()] = v
        return [self._cache[k] for k in keys]

    def _call(self, texts: list[str]) -> list[list[float]]:
        if self.embed is not None:
            return self.embed(texts)
        from cuco.llm import LLMError, import_litellm  # noqa: PLC0415 (lazy: litellm is optional)
        litellm = import_litellm()
        try:
            resp: Any = litellm.embedding(model=self.model, input=texts)
        except Exception as exc:
            raise LLMError(f"embedding model {self.model!r} failed: {exc}; use the offline n-gram filter "
                           "(embedding=None) or fix the model name/key") from None
        return [d["embedding"] for d in resp.data]

    def __call__(self, a: str, b: str) -> float:
        va, vb = self._vectors([a, b])
        dot = sum(x * y for x, y in zip(va, vb))
        na, nb = math.sqrt(sum(x * x for x in va)), math.sqrt(sum(y * y for y in vb))
        return dot / (na * nb) if na and nb else 0.0


@attrs.frozen
class NoveltyFilter:
    """threshold: a child at least this similar to any compared program is rejected; max_resamples: how many
    fresh proposals the loop draws before accepting a non-novel one; window: how many recent programs to compare."""

    threshold: float = attrs.field(default=0.95, validator=[attrs.validators.gt(0), attrs.validators.le(1)])
    n: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    max_resamples: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    window: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    embedding: EmbeddingSimilarity | None = None

    def similarity(self, a: str, b: str) -> float:
        """Similarity (0 to 1) of two programs' mutable text: the embedding's if set, else Jaccard of token n-grams."""
        ta, tb = blk.evolve_text(a), blk.evolve_text(b)
        if self.embedding is not None:
            return self.embedding(ta, tb)
        return jaccard(ngrams(tokens(ta), self.n), ngrams(tokens(tb), self.n))

    def check(self, child: Candidate, others: Sequence[Candidate], seen_points: frozenset[str] | set[str]) -> str | None:
        """None if `child` is novel, else why not."""
        if child.mutation in DIRECTIVE_MUTATIONS and child.directives is not None:
            if child.directives.label() not in seen_points:
                return None
        for other in list(others)[-self.window:]:
            if other.id == child.id:
                continue
            s = self.similarity(child.code, other.code)
            if s >= self.threshold:
                return f"evolve blocks {s:.2f} similar to candidate {other.id[:8]} (threshold {self.threshold})"
        return None
