"""One L0 rule set for every candidate: each hostile payload of tests/fixtures/hostile is rejected by the static
check of a built-in workload's candidate and by that of a user's program, wherever it sits in an EVOLVE block."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuco.design_space import Directives
from cuco.evaluate.static import check_program, check_static
from cuco.program.workload import ProgramWorkload
from test_evaluate_static import inside_block

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
PAYLOADS = sorted(p.stem for p in HOSTILE.glob("*.cu"))
CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
#: The rules that are about what a candidate may do, as opposed to its block structure or frozen text.
HOSTILE_RULES = {"include", "forbidden", "asm", "token-paste", "clock-asm", "extern"}


def _program() -> str:
    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    return w.render(Directives.from_label("lsa/deferred/world/cta/whole/comm_ctas=32/reducescatter=barrier"))


PROGRAM = _program()


def _in_program_block(snippet: str) -> str:
    """The program's rewrite with `snippet` at the end of its last EVOLVE block (file scope)."""
    at = PROGRAM.rindex("// EVOLVE-BLOCK-END")
    return PROGRAM[:at] + snippet + "\n" + PROGRAM[at:]


def test_there_are_payloads_and_the_unmodified_candidates_pass():
    assert len(PAYLOADS) >= 40
    assert check_program(PROGRAM, parent_code=PROGRAM).passed, check_program(PROGRAM, PROGRAM).reason


@pytest.mark.parametrize("name", PAYLOADS)
def test_every_hostile_payload_is_rejected_by_the_workload_check(name):
    code, _ = inside_block((HOSTILE / f"{name}.cu").read_text().rstrip("\n"))
    result = check_static(code)
    rules = {v["rule"] for v in result.data["violations"]}
    assert not result.passed and rules & HOSTILE_RULES, result.reason


@pytest.mark.parametrize("name", PAYLOADS)
def test_every_hostile_payload_is_rejected_by_the_program_check(name):
    code = _in_program_block((HOSTILE / f"{name}.cu").read_text().rstrip("\n"))
    result = check_program(code, parent_code=PROGRAM)
    rules = {v["rule"] for v in result.data["violations"]}
    assert not result.passed and rules & HOSTILE_RULES, result.reason
    assert "frozen-region" not in rules   # the payload sits in a block: the rule set, not the frozen text, caught it


@pytest.mark.parametrize("opener", ['static const char* s = R"x(', "#if 0", "#endif"])
def test_a_program_block_may_not_leave_a_literal_or_an_if_open(opener):
    """Else the frozen text after the block would be read differently from how the block was checked."""
    result = check_program(_in_program_block(opener), parent_code=PROGRAM)
    assert not result.passed and "block-open" in {v["rule"] for v in result.data["violations"]}, result.reason


@pytest.mark.parametrize("macro", ["#define kHidden 1", "#undef kHidden\n#define kHidden 1", "#define int long",
                                   "#define cudaMemcpy(d, s, n, k) cudaSuccess"])
def test_a_program_block_may_not_redefine_what_the_frozen_code_means(macro):
    result = check_program(_in_program_block(macro), parent_code=PROGRAM)
    assert not result.passed and "frozen-macro" in {v["rule"] for v in result.data["violations"]}, result.reason


def test_a_program_block_may_set_what_the_frozen_code_leaves_open_and_name_its_own_macros():
    point = PROGRAM.replace("#define CUCOFP_COMM_CTAS 32", "#define CUCOFP_COMM_CTAS 8", 1)
    assert point != PROGRAM and check_program(point, parent_code=PROGRAM).passed
    own = _in_program_block("#define MY_TILE 64\n#undef MY_TILE")
    assert check_program(own, parent_code=PROGRAM).passed, check_program(own, parent_code=PROGRAM).reason


def test_a_block_comment_left_open_swallows_the_end_marker_and_is_rejected():
    result = check_program(_in_program_block("/* the rest of the file is a comment"), parent_code=PROGRAM)
    assert not result.passed and "never closed" in result.reason


def test_members_and_ptx_named_like_forbidden_functions_stay_legal():
    snippet = ("template <class T> static int use(T& o, T* p) { return o.open(1) + p->close() + o.signal(2); }\n"
               "struct Files { int open; int (*exit)(int); };\n"
               "static Files kFiles = {.open = 1, .exit = nullptr};\n"
               '__device__ void stop() { asm volatile("exit;"); }\n'
               '__device__ unsigned ld(const unsigned* p) { unsigned v; asm volatile("ld.global.u32 %0, [%1];" '
               ': "=r"(v) : "l"(p)); return v; }')
    code, _ = inside_block(snippet)
    assert check_static(code).passed, check_static(code).reason
    assert check_program(_in_program_block(snippet), parent_code=PROGRAM).passed


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="the evaluator detects its toolchain")
def test_a_program_candidate_without_a_parent_is_held_to_cucos_own_frozen_text(tmp_path):
    """No parent (a hand-made or orphaned candidate): the frozen text is still compared, with cuco's rewrite."""
    from cuco.candidate import Candidate
    from cuco.evaluate.executor import Executor
    from cuco.program.evaluator import ProgramEvaluator

    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    ev = ProgramEvaluator(w.program, world=1, executor=Executor(gpus=0, world=1), work_dir=tmp_path)
    edited = PROGRAM.replace("constexpr int kSeqPerRank = 64", 'static int kLeak = system("id");\n'
                             "constexpr int kSeqPerRank = 64", 1)
    assert edited != PROGRAM
    [out] = ev.evaluate([Candidate(code=edited, workload=w.name)])
    assert not out.results["static"].passed and "frozen-region" in str(out.results["static"].data["violations"])
    assert "compile" not in out.results
