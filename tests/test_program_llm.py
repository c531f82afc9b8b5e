"""LLM mutations on a user's program, offline (litellm mock responses): an LLM's edit of the EVOLVE blocks of a
rewritten program becomes a candidate that the program evaluator checks and compiles (no GPU here: unmeasured)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cuco.db import CandidateDB
from cuco.design_space import Directives, Topology
from cuco.evaluate.executor import Executor
from cuco.llm import LLMClient, LLMConfig
from cuco.program.evaluator import ProgramEvaluator
from cuco.program.workload import ProgramWorkload
from cuco.search import blocks as blk
from cuco.search.loop import Mutators, Search
from cuco.search.mutators.llm import LLMMutator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"


def model_reply(**kw):
    """A 'model' that keeps the parent's blocks and adds a comment to the pipeline: a diff when asked for one,
    else every block in full."""
    prompt = kw["messages"][1]["content"]
    parent = prompt.split("```cuda\n", 1)[1].split("```", 1)[0]
    bodies = blk.split(parent).blocks
    pipeline = next(i for i, b in enumerate(bodies) if "cucoJoin();" in b)
    first = bodies[pipeline].splitlines()[0]
    point = Directives.from_label(re.search(r"cuco design point: (\S+)", parent).group(1)).to_json()
    if "SEARCH/REPLACE" in prompt and "Task\nPropose" in prompt:
        reply = f"DIRECTIVES: {point}\n<<<<<<< SEARCH\n{first}\n=======\n{first}  // reviewed\n>>>>>>> REPLACE"
    else:
        edited = [b.replace(first, first + "  // reviewed", 1) if i == pipeline else b for i, b in enumerate(bodies)]
        reply = (f"DIRECTIVES: {point}\n```cuda\n"
                 + "".join(f"// EVOLVE-BLOCK-START\n{b}// EVOLVE-BLOCK-END\n" for b in edited) + "```")
    return litellm.completion(mock_response=reply, **kw)


def test_llm_edits_of_a_program_are_checked_and_compiled_like_any_candidate(tmp_path):
    w = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu")
    space = w.space(Topology(world=1))
    ev = ProgramEvaluator(w.program, world=1, executor=Executor(gpus=0, world=1), work_dir=tmp_path / "work")
    client = LLMClient(LLMConfig(models="openai/gpt-4o-mini", cache_mode="off"), completion_fn=model_reply)
    with CandidateDB(tmp_path / "c.db") as db:
        db.add(ev.evaluate([w.fast_path(Topology(world=1))])[0])
        Search(w, space, ev, db, seed=1, islands=1, batch_size=2, max_in_flight=2,
               mutators=Mutators(llm=LLMMutator(client))).run(4)
        llm = [c for c in db.all() if c.mutation.startswith("llm")]
    assert llm, "no LLM candidate was proposed"
    edited = [c for c in llm if "// reviewed" in c.code]
    assert edited and all(c.status == "unmeasured" for c in edited), [(c.mutation, c.status, c.feedback) for c in llm]
