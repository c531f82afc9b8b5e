"""LLM mutators: `diff` (SEARCH/REPLACE inside EVOLVE-BLOCKs), `full` (rewrite the blocks) and `cross` (combine
2-3 archive candidates). Frozen code always comes from the parent; the model states its directives first."""

from __future__ import annotations

import random
from typing import Sequence

import attrs

from cuco.candidate import Candidate
from cuco.design_space import Directives
from cuco.llm import LLMBudgetError, LLMClient, LLMConfigError, LLMError
from cuco.search import blocks as blk
from cuco.search import prompts
from cuco.search.mutators.base import MutationContext, MutationError
from cuco.search.reply import ReplyError, apply_edits, parse_blocks, parse_directives, parse_edits


@attrs.frozen
class Attempt:
    """What one mutation cost and how many replies it took."""

    cost_usd: float
    replies: int
    notes: tuple[str, ...] = ()


class LLMMutator:
    """Produces children through an LLMClient. Budget exhaustion (LLMBudgetError) and configuration errors
    (LLMConfigError) propagate so that the loop can continue offline; other failures become MutationError
    after bounded retries."""

    def __init__(self, client: LLMClient, fix_attempts: int = 2, completion_kwargs: dict | None = None):
        if fix_attempts < 0:
            raise MutationError(f"fix_attempts must be >= 0, got {fix_attempts}")
        self.client = client
        self.fix_attempts = fix_attempts
        self.completion_kwargs = dict(completion_kwargs or {})  # e.g. mock_response in tests

    # -- plumbing ------------------------------------------------------------------------------------------
    def _ask(self, messages: list[dict[str, str]], ctx: MutationContext, rng: random.Random, tag: str):
        try:
            return self.client.complete(messages, ctx.temperature, rng=rng, key_extra=f"{ctx.key}:{tag}",
                                        **self.completion_kwargs)
        except (LLMBudgetError, LLMConfigError):
            raise  # not a bad reply: the loop stops asking this LLM
        except LLMError as exc:
            raise MutationError(str(exc)) from exc

    def _prompt(self, task: str, parent: Candidate, ctx: MutationContext,
                others: Sequence[Candidate] = ()) -> list[dict[str, str]]:
        return prompts.messages(task, ctx.workload, ctx.space, parent, inspirations=ctx.inspirations,
                                recommendations=ctx.recommendations, scratchpad=ctx.scratchpad, others=others,
                                island_note=ctx.island_note)

    def _converse(self, task: str, parent: Candidate, ctx: MutationContext, rng: random.Random,
                  build, others: Sequence[Candidate] = ()) -> tuple[str, Directives, Attempt]:
        """Ask, parse with `build(reply_text) -> code`, and on a ReplyError show the error and ask again."""
        messages = self._prompt(task, parent, ctx, others)
        cost, errors = 0.0, []
        for attempt in range(self.fix_attempts + 1):
            reply = self._ask(messages, ctx, rng, f"{task}:{attempt}")
            cost += reply.cost_usd
            try:
                point = parse_directives(reply.text, ctx.space)
                code = build(reply.text)
                return code, point, Attempt(cost, attempt + 1, tuple(errors))
            except (ReplyError, blk.BlockError) as exc:
                errors.append(str(exc))
                messages = [*messages, {"role": "assistant", "content": reply.text}, prompts.retry_message(str(exc))]
        raise MutationError(f"llm_{task}: no usable reply after {self.fix_attempts + 1} tries; last error: {errors[-1]}",
                            cost_usd=cost)

    def _finish(self, parent: Candidate, code: str, point: Directives, mutation: str, ctx: MutationContext,
                attempt: Attempt, others: Sequence[Candidate] = (), extra_cost: float = 0.0) -> Candidate:
        note = "" if not attempt.notes else f"{len(attempt.notes)} reply(ies) rejected before this one: {attempt.notes[-1]}"
        child = parent.child(code, point, mutation, inspiration_ids=tuple(c.id for c in (*others, *ctx.inspirations)),
                             llm_cost_usd=attempt.cost_usd + extra_cost, feedback=note)
        return child.evolve(island=ctx.island)

    # -- operators -----------------------------------------------------------------------------------------
    def diff(self, parent: Candidate, ctx: MutationContext, rng: random.Random) -> Candidate:
        """SEARCH/REPLACE edits inside the EVOLVE-BLOCKs; after failed retries, a `full` rewrite instead."""
        skeleton = blk.split(parent.code)

        def build(text: str) -> str:
            code = apply_edits(parent.code, parse_edits(text))
            child = blk.split(code)
            if child.frozen != skeleton.frozen:  # cannot happen when edits stay inside blocks; checked anyway
                raise ReplyError("the edits changed frozen code; edit only inside the EVOLVE-BLOCKs")
            return code

        try:
            code, point, attempt = self._converse("diff", parent, ctx, rng, build)
        except MutationError as exc:
            spent = exc.cost_usd
            try:
                child = self.full(parent, ctx, rng)
            except MutationError as again:
                raise MutationError(f"{exc}; then {again}", cost_usd=spent + again.cost_usd) from None
            return child.evolve(llm_cost_usd=child.llm_cost_usd + spent,
                                feedback=(child.feedback + f"\n(diff failed, rewrote instead: {exc})").strip())
        return self._finish(parent, code, point, "llm_diff", ctx, attempt)

    def full(self, parent: Candidate, ctx: MutationContext, rng: random.Random) -> Candidate:
        """A rewrite of the blocks, spliced into the parent's frozen skeleton."""
        return self._rewrite("full", parent, ctx, rng, (), "llm_full")

    def cross(self, parent: Candidate, others: Sequence[Candidate], ctx: MutationContext,
              rng: random.Random) -> Candidate:
        """Combine the parent with 1-2 other candidates; the result keeps the parent's frozen code."""
        if not 1 <= len(others) <= 2:
            raise MutationError(f"cross combines 2-3 candidates; got the parent and {len(others)} others")
        return self._rewrite("cross", parent, ctx, rng, tuple(others), "llm_cross")

    def _rewrite(self, task: str, parent: Candidate, ctx: MutationContext, rng: random.Random,
                 others: tuple[Candidate, ...], mutation: str) -> Candidate:
        skeleton = blk.split(parent.code)
        tampered: list[bool] = []

        def build(text: str) -> str:
            bodies = parse_blocks(text, len(skeleton.blocks))
            tampered.append(_frozen_differs(text, skeleton))
            return skeleton.with_blocks(bodies).join()

        code, point, attempt = self._converse(task, parent, ctx, rng, build, others)
        child = self._finish(parent, code, point, mutation, ctx, attempt, others)
        if tampered and tampered[-1]:
            child = child.evolve(feedback=(child.feedback + "\nfrozen code in the reply differed from the parent's "
                                           "and was discarded").strip())
        return child


def _frozen_differs(text: str, skeleton: blk.Skeleton) -> bool:
    """True if the reply carries frozen code (outside its blocks) that is not the parent's."""
    try:
        reply = blk.split(_strip_fence(text), require=False)
    except blk.BlockError:
        return False
    def code_only(part: str) -> str:  # the frozen text between two blocks: its first and last lines are markers
        return "\n".join(ln.strip() for ln in part.splitlines()[1:-1] if ln.strip())

    between = [code_only(f) for f in reply.frozen[1:-1]]
    parent_between = [code_only(f) for f in skeleton.frozen[1:-1]]
    return any(o and o != p for o, p in zip(between, parent_between))


def _strip_fence(text: str) -> str:
    start = text.find("```")
    if start < 0:
        return text
    body = text[text.find("\n", start) + 1:]
    end = body.rfind("```")
    return body[:end] if end >= 0 else body
