"""The frozen-region rule holds in `cuco run`: the parent's code reaches L0 of the evaluator the run builds,
directive-mutator children of GEMM+AllGather pass it, and an edit of frozen code fails it, in a workload's run
and in a program's (where a candidate without a parent is held to cuco's own rewrite)."""

from __future__ import annotations

import random
from pathlib import Path

from cuco import workloads
from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.design_space import Topology
from cuco.evaluate.static import check_static
from cuco.run import RunOptions, parent_code_from
from cuco.run import Run
from cuco.search.mutators.base import MutationContext
from cuco.search.mutators.directive import DirectiveMutator

WL = workloads.get("gemm_allgather")
SPACE = WL.space(Topology(world=2, nodes=1, gin_available=False))


def _ctx(seen: frozenset[str] = frozenset()) -> MutationContext:
    return MutationContext(WL, SPACE, 0, seen)


def _stored_family(db: CandidateDB, n: int) -> list[Candidate]:
    """n directive children (near and far) of rendered parents, all stored with their parents."""
    rng = random.Random(7)
    mutator = DirectiveMutator()
    children = []
    for point in [SPACE.sample(rng) for _ in range(n)]:
        parent = Candidate(code=WL.render(point), workload=WL.name, directives=point)
        db.add(parent)
        make = mutator.near if rng.random() < 0.5 else mutator.far
        child = make(parent, _ctx(frozenset({point.label()})), rng)
        db.add(child)
        children.append(child)
    return children


def test_directive_children_pass_l0_against_their_stored_parent(tmp_path):
    with CandidateDB(tmp_path / "c.db") as db:
        children = _stored_family(db, 24)
        parent_code = parent_code_from(db)
        for child in children:
            parent = parent_code(child)
            assert parent is not None and parent != child.code  # compared, and the points differ
            result = check_static(child.code, parent)
            assert result.passed, (child.directives.label(), result.reason)


def _edit_frozen(code: str) -> str:
    """`code` with its first frozen code line after the last EVOLVE block changed."""
    blocks_end = code.rindex("// EVOLVE-BLOCK-END")
    tail = code[blocks_end:]
    frozen_line = next(line for line in tail.splitlines()[1:] if line.strip() and not line.startswith("//"))
    return code[:blocks_end] + tail.replace(frozen_line, frozen_line + " /* x */ ;", 1)


def _opened_run(tmp_path, workload: str, monkeypatch) -> Run:
    """The evaluator as `cuco run` builds it (no GPU here: static check and compile)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    return Run.open(RunOptions(workload, world=1, run_dir=str(tmp_path / "run"), evaluations=1, progress=False),
                    on_event=lambda _line: None)


def test_an_edit_of_frozen_code_fails_l0_in_a_run(tmp_path, monkeypatch):
    with _opened_run(tmp_path, "gemm_allgather", monkeypatch) as run:
        db = run.search_loop.db
        [child] = _stored_family(db, 1)
        edited = child.evolve(code=_edit_frozen(child.code))
        [out] = run.evaluator.evaluate([edited])
    assert out.status == "failed:static" and "code outside the EVOLVE blocks was changed" in out.results["static"].reason


def test_a_programs_candidate_with_an_edited_frozen_text_fails_l0_in_a_run_with_or_without_a_parent(
        tmp_path, monkeypatch):
    program = Path(__file__).parent / "fixtures" / "host_programs" / "rs_grad_shard.cu"
    with _opened_run(tmp_path, str(program), monkeypatch) as run:
        fast = run.workload.fast_path(Topology(world=1))
        run.search_loop.db.add(fast)
        orphan = Candidate(code=_edit_frozen(fast.code), workload=fast.workload, mutation="llm_full")
        child = fast.child(_edit_frozen(fast.code), None, "llm_diff")
        outs = run.evaluator.evaluate([orphan, child])
    for out in outs:
        assert out.status == "failed:static", out.results["static"].reason
        assert "code outside the EVOLVE blocks was changed" in out.results["static"].reason


def test_a_directive_child_of_the_fast_path_program_is_not_compared(tmp_path):
    with CandidateDB(tmp_path / "c.db") as db:
        fast = Candidate(code="// the fast path's program\n", workload=WL.name, mutation="fastpath")
        db.add(fast)
        child = DirectiveMutator().near(fast, _ctx(), random.Random(1))
        assert child.parent_id == fast.id and parent_code_from(db)(child) is None
        llm_child = fast.child("// edited\n", None, "llm_diff")
        assert parent_code_from(db)(llm_child) == fast.code

