"""The frozen-region rule holds in `cuco run`: the parent's code reaches L0, directive-mutator children of
GEMM+AllGather pass it, and an edit of frozen code fails it."""

from __future__ import annotations

import random

from cuco import workloads
from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.design_space import Topology
from cuco.evaluate.cascade import Evaluator
from cuco.evaluate.executor import Executor
from cuco.evaluate.static import check_static
from cuco.pipeline import parent_code_from
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


def test_an_edit_of_frozen_code_fails_l0_in_the_cascade(tmp_path):
    with CandidateDB(tmp_path / "c.db") as db:
        [child] = _stored_family(db, 1)
        blocks_end = child.code.index("// EVOLVE-BLOCK-END")
        tail = child.code[blocks_end:]
        frozen_line = next(line for line in tail.splitlines()[1:] if line.strip() and not line.startswith("//"))
        edited = child.evolve(code=child.code[:blocks_end] + tail.replace(frozen_line, frozen_line + " /* x */ ;", 1))
        cascade = Evaluator(WL, world=2, executor=Executor(world=2, devices=[]), parent_code=parent_code_from(db))
        [out] = cascade.evaluate([edited])
    assert out.status == "failed:static" and "code outside the EVOLVE blocks was changed" in out.results["static"].reason


def test_a_directive_child_of_the_fast_path_program_is_not_compared(tmp_path):
    with CandidateDB(tmp_path / "c.db") as db:
        fast = Candidate(code="// the fast path's program\n", workload=WL.name, mutation="fastpath")
        db.add(fast)
        child = DirectiveMutator().near(fast, _ctx(), random.Random(1))
        assert child.parent_id == fast.id and parent_code_from(db)(child) is None
        llm_child = fast.child("// edited\n", None, "llm_diff")
        assert parent_code_from(db)(llm_child) == fast.code

