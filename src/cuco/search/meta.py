"""Meta-summary: every N evaluations, what the search has learnt so far, as a scratchpad and <= 5
recommendations for the next prompts. Offline from the database's statistics; with an LLM, written by it."""

from __future__ import annotations

import collections
import random
import re
from typing import Any, Mapping, Sequence

import attrs

from cuco.candidate import Candidate
from cuco.design_space import DIRECTIVE_NAMES, DesignSpace, format_bytes
from cuco.search import prompts

MAX_RECOMMENDATIONS = 5


@attrs.frozen
class MetaSummary:
    """What the search has learnt: a scratchpad, recommendations, the evaluations it covers, and its source."""

    scratchpad: str = ""
    recommendations: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    evaluations: int = 0
    source: str = "offline"

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict."""
        return {"scratchpad": self.scratchpad, "recommendations": list(self.recommendations),
                "evaluations": self.evaluations, "source": self.source}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MetaSummary":
        """The summary stored by `to_dict` (missing fields take their defaults)."""
        return cls(d.get("scratchpad", ""), tuple(d.get("recommendations", ())), int(d.get("evaluations", 0)),
                   d.get("source", "offline"))


def _shown(name: str, value: Any) -> str:
    return format_bytes(value) if name == "chunk_bytes" else str(value)


def statistics(candidates: Sequence[Candidate], space: DesignSpace) -> dict[str, Any]:
    """Per directive value: tries, passes, best fitness, failures by level; plus the best candidate."""
    per: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in DIRECTIVE_NAMES}
    failures: collections.Counter[tuple[str, str]] = collections.Counter()
    for c in candidates:
        if c.status == "pending":
            continue
        if c.failed:
            level = c.status.split(":", 1)[1]
            reason = (c.results[level].reason or "no reason given").splitlines()[0][:120]
            failures[(level, reason)] += 1
        if c.directives is None:
            continue
        for n in DIRECTIVE_NAMES:
            s = per[n].setdefault(_shown(n, getattr(c.directives, n)),
                                  {"tries": 0, "passed": 0, "best": None, "failed": collections.Counter()})
            s["tries"] += 1
            if c.failed:
                s["failed"][c.status.split(":", 1)[1]] += 1
            elif c.fitness is not None:
                s["passed"] += 1
                s["best"] = c.fitness if s["best"] is None else max(s["best"], c.fitness)
    ranked = [c for c in candidates if c.ranked]
    best = max(ranked, key=lambda c: c.fitness) if ranked else None  # type: ignore[arg-type, return-value]
    untried = {n: [_shown(n, v) for v in space.values(n) if _shown(n, v) not in per[n]] for n in DIRECTIVE_NAMES}
    return {"per": per, "failures": failures, "best": best, "untried": untried,
            "evaluated": sum(1 for c in candidates if c.status != "pending")}


def offline_summary(candidates: Sequence[Candidate], space: DesignSpace) -> MetaSummary:
    """The summary from statistics alone: which values won, which failed where and why, what is untried."""
    st = statistics(candidates, space)
    recs: list[str] = []
    best = st["best"]
    lines = [f"{st['evaluated']} candidates evaluated."]
    if best is not None:
        label = best.directives.label() if best.directives else "its own code"
        lines.append(f"Best so far: {label} with fitness {best.fitness:.4g}.")
        recs.append(f"build on the best point {label} (fitness {best.fitness:.4g})")
    contrasts = []
    for n, values in st["per"].items():
        scored = sorted(((s["best"], v) for v, s in values.items() if s["best"] is not None), reverse=True)
        if len(scored) >= 2 and scored[0][0] > 0:
            contrasts.append(((scored[0][0] - scored[-1][0]) / scored[0][0], n, scored))
    for spread, n, scored in sorted(contrasts, reverse=True)[:2]:
        top, worst = scored[0], scored[-1]
        recs.append(f"prefer {n}={top[1]} (best fitness {top[0]:.4g}; worst value {n}={worst[1]} reached {worst[0]:.4g})")
        lines.append(f"{n}: " + ", ".join(f"{v} best {f:.4g}" for f, v in scored) + ".")
    bad = []
    for n, values in st["per"].items():
        for v, s in values.items():
            nfail = sum(s["failed"].values())
            if s["tries"] >= 2 and nfail / s["tries"] >= 0.5:
                level, _ = s["failed"].most_common(1)[0]
                bad.append((nfail / s["tries"], s["tries"], n, v, level, nfail))
    for rate, tries, n, v, level, nfail in sorted(bad, reverse=True)[:1]:
        reason = next((r for (lv, r), _ in st["failures"].most_common() if lv == level), "")
        recs.append(f"avoid {n}={v}: {nfail}/{tries} failed, mostly at {level}" + (f" ({reason})" if reason else ""))
    if st["failures"]:
        lines.append("Failures: " + "; ".join(f"{k} x {lv}: {r}" for (lv, r), k in st["failures"].most_common(3)) + ".")
    untried = [f"{n}={v}" for n, vs in st["untried"].items() for v in vs]
    if untried:
        recs.append("untested values worth one try: " + ", ".join(untried[:6]))
        lines.append("Untested: " + ", ".join(untried) + ".")
    return MetaSummary(" ".join(lines), tuple(recs[:MAX_RECOMMENDATIONS]), st["evaluated"], "offline")


_REC = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.*\S)\s*$")


def parse_summary(text: str, evaluations: int) -> MetaSummary | None:
    """Read an LLM's `SCRATCHPAD:` / `RECOMMENDATIONS:` reply; None if it does not follow the format."""
    s, r = text.find("SCRATCHPAD:"), text.find("RECOMMENDATIONS:")
    if s < 0 or r < 0 or r < s:
        return None
    pad = text[s + len("SCRATCHPAD:"):r].strip()
    recs = [m.group(1) for line in text[r + len("RECOMMENDATIONS:"):].splitlines() if (m := _REC.match(line))]
    if not recs:
        return None
    return MetaSummary(pad, tuple(recs[:MAX_RECOMMENDATIONS]), evaluations, "llm")


@attrs.frozen
class MetaSummarizer:
    """Summarise every `every` evaluations; `recent` candidates are shown to the LLM in full."""

    every: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    recent: int = attrs.field(default=12, validator=attrs.validators.ge(1))

    def due(self, evaluated_before: int, evaluated_now: int) -> bool:
        """True when the evaluation count crossed a multiple of `every` between the two counts."""
        return evaluated_now // self.every > evaluated_before // self.every

    def summarize(self, candidates: Sequence[Candidate], space: DesignSpace, client: Any = None,
                  rng: random.Random | None = None, key: str = "", **completion_kwargs: Any) -> MetaSummary:
        """The summary of `candidates`: offline statistics, rewritten by `client`'s LLM if given and it answers."""
        base = offline_summary(candidates, space)
        if client is None:
            return base
        from cuco.llm import LLMError  # noqa: PLC0415 (lazy)
        recent = [c for c in candidates if c.status != "pending"][-self.recent:]
        body = "Statistics:\n" + base.scratchpad + "\nOffline recommendations:\n" + "\n".join(
            f"- {r}" for r in base.recommendations) + "\n\nRecent candidates:\n" + "\n".join(
            f"- {prompts.describe(c)}\n{prompts.feedback(c)}" for c in recent)
        messages = [{"role": "system", "content": prompts.SUMMARY_SYSTEM}, {"role": "user", "content": body}]
        try:
            reply = client.complete(messages, 0.0, rng=rng, key_extra=f"meta:{key}", **completion_kwargs)
        except LLMError:
            return base  # budget or provider trouble: the statistics still hold
        return parse_summary(reply.text, base.evaluations) or base
