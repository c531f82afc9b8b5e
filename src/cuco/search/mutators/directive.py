"""The offline mutator: move to another legal design point and re-render the workload's template (no LLM)."""

from __future__ import annotations

import random
from typing import Sequence

import attrs

from cuco.candidate import Candidate
from cuco.design_space import DIRECTIVE_NAMES, Directives
from cuco.search.mutators.base import MutationContext, MutationError

#: Mixes a crossover tries at most (2^directives, in random order): enough for the five core directives and a
#: few extra ones.
MAX_MIXES = 1024


@attrs.frozen
class DirectiveMutator:
    """near: a neighbour (one directive changed), chosen by value_scores with probability `greed`; far: 2..far_steps changes; sample: a uniform legal point;
    crossover: each directive from one of two parents, repaired to a legal point. Unevaluated points first."""

    far_steps: int = attrs.field(default=3, validator=attrs.validators.ge(2))
    greed: float = attrs.field(default=0.75, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    name: str = "directive"

    # -- children ------------------------------------------------------------------------------------------
    def _child(self, parent: Candidate, point: Directives, ctx: MutationContext, mutation: str,
               inspirations: Sequence[str] = ()) -> Candidate:
        try:
            code = ctx.workload.render(point, ctx.space.topology)
        except Exception as exc:  # a template that cannot render a legal point is a workload bug: say which
            raise MutationError(f"workload {ctx.workload.name!r} cannot render {point.label()}: {exc}") from exc
        child = parent.child(code, point, mutation, inspiration_ids=tuple(inspirations))
        return child.evolve(island=ctx.island)  # child() keeps the parent's island; a migrant's child is ours

    def _unseen(self, points: Sequence[Directives], ctx: MutationContext) -> list[Directives]:
        return [p for p in points if p.label() not in ctx.seen]

    def _any_unseen(self, ctx: MutationContext, rng: random.Random) -> Directives | None:
        for _ in range(64):
            p = ctx.space.sample(rng)
            if p.label() not in ctx.seen:
                return p
        rest = self._unseen(list(ctx.space.points()), ctx)
        return rng.choice(rest) if rest else None

    def _promising(self, origin: Directives, options: Sequence[Directives], ctx: MutationContext,
                   rng: random.Random) -> Directives:
        """Mostly the option whose changed values scored best so far (untried values count as the best seen:
        optimism about the unknown); otherwise a uniform pick, so no option starves."""
        if not ctx.value_scores or rng.random() >= self.greed:
            return rng.choice(list(options))
        top = max(ctx.value_scores.values())

        def score(p: Directives) -> float:
            changed = [n for n in DIRECTIVE_NAMES if getattr(p, n) != getattr(origin, n)]
            return min(ctx.value_scores.get(f"{n}={getattr(p, n)}", top) for n in changed) if changed else top

        best = max(score(p) for p in options)
        return rng.choice([p for p in options if score(p) == best])

    # -- operators -----------------------------------------------------------------------------------------
    def sample(self, parent: Candidate, ctx: MutationContext, rng: random.Random) -> Candidate:
        """A uniformly drawn legal point not yet evaluated (any legal point once the space is exhausted)."""
        point = self._any_unseen(ctx, rng) or ctx.space.sample(rng)
        return self._child(parent, point, ctx, "directive")

    def near(self, parent: Candidate, ctx: MutationContext, rng: random.Random) -> Candidate:
        """A neighbour of the parent; if all were evaluated, a point two steps away; then anything unseen."""
        if parent.directives is None or not ctx.space.is_legal(parent.directives):
            return self.sample(parent, ctx, rng)
        ring1 = ctx.space.neighbours(parent.directives)
        fresh = self._unseen(ring1, ctx)
        if not fresh:
            ring2 = {q.label(): q for p in ring1 for q in ctx.space.neighbours(p)}
            fresh = self._unseen(sorted(ring2.values(), key=Directives.label), ctx)
        if fresh:
            return self._child(parent, self._promising(parent.directives, fresh, ctx, rng), ctx, "directive")
        point = self._any_unseen(ctx, rng) or (rng.choice(ring1) if ring1 else ctx.space.sample(rng))
        return self._child(parent, point, ctx, "directive")

    def far(self, parent: Candidate, ctx: MutationContext, rng: random.Random) -> Candidate:
        """A random walk of 2..far_steps neighbour moves, ending on an unseen point when one is reached."""
        if parent.directives is None or not ctx.space.is_legal(parent.directives):
            return self.sample(parent, ctx, rng)
        for _ in range(16):
            point = parent.directives
            for _ in range(rng.randint(2, self.far_steps)):
                options = ctx.space.neighbours(point)
                if not options:
                    break
                point = rng.choice(options)
            if point.label() not in ctx.seen and ctx.space.distance(point, parent.directives) >= 1.5:
                return self._child(parent, point, ctx, "directive")
        return self.sample(parent, ctx, rng)

    def crossover(self, a: Candidate, b: Candidate, ctx: MutationContext, rng: random.Random) -> Candidate:
        """Each directive from a or b; if the mix is illegal or seen, the nearest legal unseen mix, else a
        neighbour of the mix that is legal."""
        if a.directives is None or b.directives is None:
            return self.near(a, ctx, rng)
        # Every directive the points have, the workload's extra ones too (a mix of the five core ones alone lacks
        # them, so in a space with extras every such mix was illegal and crossover silently became a step).
        extra = sorted(set(dict(a.directives.extra)) & set(dict(b.directives.extra)))
        names = [*DIRECTIVE_NAMES, *extra]
        masks = list(range(1 << len(names)))
        rng.shuffle(masks)
        legal: list[Directives] = []
        for mask in masks[:MAX_MIXES]:
            pick = {n: (b if mask >> i & 1 else a).directives.get(n) for i, n in enumerate(names)}
            mix = Directives.from_dict({**{n: pick[n] for n in DIRECTIVE_NAMES}, "extra": {n: pick[n] for n in extra}})
            if ctx.space.is_legal(mix) and mix not in legal:
                legal.append(mix)
        mixed = [p for p in legal if p not in (a.directives, b.directives)]
        fresh = self._unseen(mixed, ctx)
        if fresh:
            return self._child(a, fresh[0], ctx, "directive_cross", (b.id,))
        around = self._unseen([q for p in (mixed or legal) for q in ctx.space.neighbours(p)], ctx)
        if around:
            return self._child(a, rng.choice(around), ctx, "directive_cross", (b.id,))
        return self.near(a, ctx, rng)
