"""LLM mutators (diff, full, cross) driven by litellm mock responses: edits inside and outside EVOLVE-BLOCKs,
malformed replies, frozen-code tampering, retries with the error shown, fallback to a rewrite, budget stop."""

from __future__ import annotations

import os
import json
import random

import pytest
from test_search_workload import TOPOLOGY, make_workload, render

from cuco.candidate import Candidate
from cuco.llm import LLMBudgetError, LLMClient, LLMConfig
from cuco.search import blocks as blk
from cuco.search.mutators.base import MutationContext, MutationError
from cuco.search.mutators.llm import LLMMutator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before the import: no price-list download
litellm = pytest.importorskip("litellm")

W = make_workload()
SPACE = W.space(TOPOLOGY)
P0 = SPACE.conservative()
PARENT = Candidate(code=render(P0), workload=W.name, directives=P0, fitness=1.0)
TARGET = {"backend": "lsa", "placement": "stream_overlap", "sync_scope": "signal", "issuer": "warp",
          "chunk_bytes": 4 << 20}
HEAD = "DIRECTIVES: " + json.dumps(TARGET) + "\n"


def scripted(replies):
    """A completion function that answers with the next scripted reply through litellm's own mock path."""
    seen = []

    def fn(**kw):
        seen.append(kw["messages"])
        return litellm.completion(mock_response=replies[min(len(seen) - 1, len(replies) - 1)], **kw)

    fn.seen = seen
    return fn


def mutator(replies, fix_attempts=2, **cfg):
    fn = scripted(replies)
    return LLMMutator(LLMClient(LLMConfig(models="openai/gpt-4o-mini", backoff_s=0, **cfg), completion_fn=fn),
                      fix_attempts=fix_attempts), fn


def ctx(**kw):
    return MutationContext(W, SPACE, island=1, temperature=0.2, key="t", **kw)


def edit(search, replace):
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


INSIDE = "constexpr int kChunkBytes = 0;  // whole"
FROZEN = "  req->lsa_barrier_count = 8;"


def test_diff_inside_a_block_applies_and_records_lineage_and_cost():
    m, fn = mutator([HEAD + edit(INSIDE, "constexpr int kChunkBytes = 4194304;")])
    child = m.diff(PARENT, ctx(), random.Random(0))
    assert "kChunkBytes = 4194304;" in child.code and INSIDE not in child.code
    assert child.mutation == "llm_diff" and child.parent_id == PARENT.id and child.island == 1
    assert child.directives.to_dict() == TARGET and child.llm_cost_usd > 0
    assert blk.split(child.code).frozen == blk.split(PARENT.code).frozen


def test_diff_outside_blocks_is_rejected_then_fixed_with_the_error_shown():
    m, fn = mutator([HEAD + edit(FROZEN, "  req->lsa_barrier_count = 1;"),
                     HEAD + edit(INSIDE, "constexpr int kChunkBytes = 1048576;")])
    child = m.diff(PARENT, ctx(), random.Random(0))
    assert FROZEN in child.code and "kChunkBytes = 1048576;" in child.code
    retry_prompt = fn.seen[1][-1]["content"]
    assert "outside the EVOLVE-BLOCKs" in retry_prompt
    assert "rejected" in child.feedback


def test_diff_that_keeps_failing_falls_back_to_a_full_rewrite():
    bad = HEAD + edit("not in the program", "x")
    body = "// EVOLVE-BLOCK-START\n__device__ int rewritten() { return 1; }\n// EVOLVE-BLOCK-END\n"
    m, fn = mutator([bad, bad, HEAD + "```cuda\n" + body + "```"], fix_attempts=1)
    child = m.diff(PARENT, ctx(), random.Random(0))
    assert child.mutation == "llm_full" and "rewritten()" in child.code
    assert "diff failed" in child.feedback
    assert blk.split(child.code).frozen == blk.split(PARENT.code).frozen


@pytest.mark.parametrize("reply, why", [
    ("no directives here\n" + edit(INSIDE, "x"), "DIRECTIVES"),
    ("DIRECTIVES: {not json}\n" + edit(INSIDE, "x"), "does not parse"),
    ("DIRECTIVES: " + json.dumps({**TARGET, "placement": "deferred"}) + "\n" + edit(INSIDE, "x"), "illegal"),
    ("DIRECTIVES: " + json.dumps({**TARGET, "colour": "red"}) + "\n" + edit(INSIDE, "x"), "unknown directive"),
    (HEAD + "I would change the chunk size.", "no SEARCH/REPLACE"),
    (HEAD + edit("constexpr", "x"), "occurs"),
    (HEAD + edit(INSIDE, "// EVOLVE-BLOCK-END\nint sneaky;"), "EVOLVE-BLOCK-END"),
])
def test_malformed_replies_fail_cleanly_with_the_reason(reply, why):
    m, fn = mutator([reply], fix_attempts=0)
    m_full_reply = m  # the fallback rewrite gets the same malformed reply and fails too
    with pytest.raises(MutationError) as err:
        m_full_reply.diff(PARENT, ctx(), random.Random(0))
    assert why in str(err.value)
    assert err.value.cost_usd > 0


def test_full_rewrite_keeps_the_parents_frozen_code_even_if_the_model_changes_it():
    tampered = PARENT.code.replace(FROZEN, "  req->lsa_barrier_count = 0;  // fewer barriers").replace(
        INSIDE, "constexpr int kChunkBytes = 65536;")
    m, _ = mutator([HEAD + "```cuda\n" + tampered + "```"])
    child = m.full(PARENT, ctx(), random.Random(0))
    assert FROZEN in child.code and "lsa_barrier_count = 0" not in child.code
    assert "kChunkBytes = 65536;" in child.code
    assert blk.split(child.code).frozen == blk.split(PARENT.code).frozen


def test_full_rewrite_with_the_wrong_number_of_blocks_is_rejected():
    two = "// EVOLVE-BLOCK-START\nint a;\n// EVOLVE-BLOCK-END\n// EVOLVE-BLOCK-START\nint b;\n// EVOLVE-BLOCK-END\n"
    m, fn = mutator([HEAD + two], fix_attempts=1)
    with pytest.raises(MutationError, match="expected 1 EVOLVE-BLOCK"):
        m.full(PARENT, ctx(), random.Random(0))
    assert len(fn.seen) == 2


def test_cross_combines_two_archive_candidates_and_names_them():
    other_point = SPACE.neighbours(P0)[0]
    other = Candidate(code=render(other_point), workload=W.name, directives=other_point, fitness=1.1)
    body = "// EVOLVE-BLOCK-START\n__device__ int combined() { return 2; }\n// EVOLVE-BLOCK-END\n"
    m, fn = mutator([HEAD + body])
    child = m.cross(PARENT, [other], ctx(), random.Random(0))
    assert child.mutation == "llm_cross" and other.id in child.inspiration_ids and "combined()" in child.code
    assert "Program 2 to combine" in fn.seen[0][-1]["content"]
    with pytest.raises(MutationError, match="2-3"):
        m.cross(PARENT, [], ctx(), random.Random(0))


def test_prompt_is_directive_first_and_carries_the_context():
    m, fn = mutator([HEAD + edit(INSIDE, "constexpr int kChunkBytes = 4194304;")])
    m.diff(PARENT, ctx(recommendations=("prefer placement=fused",), scratchpad="fused won twice"), random.Random(0))
    system, user = fn.seen[0][0]["content"], fn.seen[0][1]["content"]
    assert "DIRECTIVES: {json}" in system
    for part in ("## Workload", "AllGather A", "132 SMs", "ncclGetLsaPointer", "prefer placement=fused",
                 "fused won twice", "Cascade feedback", "SEARCH"):
        assert part in user, part


def test_budget_exhaustion_propagates_so_the_loop_can_go_offline():
    m, fn = mutator([HEAD + edit(INSIDE, "x")], budget_usd=1e-6)
    with pytest.raises(LLMBudgetError):
        m.diff(PARENT, ctx(), random.Random(0))
    assert fn.seen == []  # refused before any call
