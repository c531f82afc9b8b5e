"""No compiler or assembler log reaches the database, a report or a prompt without the filter, and the filter
quotes only the candidate: real nvcc compiles of candidates that read a secret-bearing file (a header-named
file, a `.netrc` reached through an `/include/` path, and an assembler `.include`), and what is stored of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import toolchain_or_skip
from cuco.candidate import Candidate
from cuco.design_space import Directives
from cuco.evaluate.batch import Batch
from cuco.evaluate.compile import Compiler, trim_log
from cuco.program.workload import ProgramWorkload

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
SECRET = "hunter2-7f3a9c"
SECRET_TEXT = f"machine api.example.com login deploy password {SECRET}\nsk_live_{SECRET} = {SECRET};\n"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc: the point is a real compile")


@pytest.fixture
def secrets(tmp_path) -> dict[str, Path]:
    """The same secret in a header-named file and in a .netrc reached through a path with /include/ in it."""
    (tmp_path / "include").mkdir()
    (tmp_path / "keys.h").write_text(SECRET_TEXT)
    (tmp_path / ".netrc").write_text(SECRET_TEXT)
    return {"header": tmp_path / "keys.h", "netrc": tmp_path / "include" / ".." / ".netrc"}


@needs_nvcc
@pytest.mark.parametrize("which", ["header", "netrc"])
def test_a_program_candidate_that_includes_a_secret_stores_no_line_of_it(tmp_path, secrets, which):
    from cuco.program.evaluator import ProgramEvaluator

    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    code = w.render(Directives.from_label("lsa/deferred/world/cta/whole/comm_ctas=32/reducescatter=barrier"))
    at = code.rindex("// EVOLVE-BLOCK-END")
    code = code[:at] + f'#include "{secrets[which]}"\n' + code[at:]
    ev = ProgramEvaluator(w.program, world=1, work_dir=tmp_path / "work")
    # the compile level itself, as the search stores it (L0 would refuse this include before it got here)
    batch = Batch([Candidate(code=code, workload=w.name)])
    ev.compile_level(batch, batch.ids)
    [out] = batch.candidates()
    stored = out.results["compile"]
    assert not stored.passed
    assert SECRET not in stored.reason and "password" not in stored.reason, stored.reason
    assert "not the candidate" in stored.reason
    assert SECRET not in out.evolve(feedback="").results["compile"].reason


@needs_nvcc
def test_an_assembler_include_of_a_secret_is_not_quoted_by_the_workload_compiler(tmp_path, secrets):
    compiler = Compiler(toolchain_or_skip(), cache_dir=tmp_path / "cache", jobs=1)
    outcome = compiler.compile(f'asm(".include \\"{secrets["netrc"]}\\"");\n')
    assert not outcome.ok
    full = next((tmp_path / "cache").glob("*/full_log.txt")).read_text()
    assert SECRET in full, "the assembler did not read the file: the test would prove nothing"
    assert SECRET not in outcome.log_excerpt and "password" not in outcome.log_excerpt, outcome.log_excerpt
    cached = compiler.compile(f'asm(".include \\"{secrets["netrc"]}\\"");\n')   # the cached failure, too
    assert cached.cached and SECRET not in cached.log_excerpt


def test_an_error_in_another_file_keeps_its_place_and_message_but_no_quoted_text():
    recorded = ("/opt/nccl/include/nccl_device/core.h(40): error: identifier \"ncclTeamX\" is undefined\n"
                "      struct ncclTeamX t;\n"
                "      ^\n"
                "/x/include/../.netrc:1: Error: no such instruction: `machine api password hunter2'\n"
                "candidate.cu(3): error: identifier \"oops\" is undefined\n"
                "    oops();\n"
                "    ^\n")
    text = trim_log(recorded, "// 1\n// 2\n    oops();\n")
    assert "core.h(40): error: identifier" in text and "is undefined" in text
    assert "ncclTeamX" not in text and "hunter2" not in text and "machine api" not in text
    assert 'identifier "oops" is undefined' in text and "    oops();" in text
