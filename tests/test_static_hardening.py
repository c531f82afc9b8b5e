"""The static check cannot be talked around: macros, digraphs, line splices and indirect names in the
candidate's own text are seen for what they are, and compiler output never quotes a file outside the
candidate (issue: reliability, part 2, defect 5; part 3)."""

from __future__ import annotations

import pytest

from cuco.evaluate.compile import trim_log
from cuco.evaluate.static import check_static, normalise
from test_evaluate_static import GOOD, inside_block


def _rules(code: str) -> set[str]:
    result = check_static(code)
    assert not result.passed, "accepted"
    return {v["rule"] for v in result.data["violations"]}


def _at_top(line: str) -> str:
    return line + "\n" + GOOD


@pytest.mark.parametrize("directive", [
    '#include "cuco/../../../../etc/passwd"',
    "#include </etc/passwd>",
    '#include "cuco\\..\\..\\secret.h"',
    '#define P "/etc/passwd"\n#include P',
    "%:include </etc/passwd>",
    "??=include </etc/passwd>",
    "#incl\\\nude </etc/passwd>",
    "# \\\n include </etc/passwd>",
    "#include_next <stdio.h>",
    "#embed </etc/passwd>",
])
def test_include_tricks_are_rejected(directive):
    assert "include" in _rules(_at_top(directive))


@pytest.mark.parametrize("snippet", [
    'static void f0() { asm volatile("syscall"); }',
    'static void f1() { asm volatile("mov $60, %%rax\\n\\t" "sys" "call"); }',
    "static void* f2() { void* p; cudaDriverEntryPointQueryResult q; "
    'cudaGetDriverEntryPoint("cuMemAlloc", &p, 0, &q); return p; }',
    "static char** f3() { extern char** __environ_copy; return __environ; }",
    "static void f4() { raise(9); }",
    "static void* f5() { return (void*)&ncclAllGather; }",
    "static void* f6() { auto f = ncclAllGather; return (void*)f; }",
    "static long f7() { return sys\\\ncall(60, 0); }",
    "static int f8() <% return fork(); %>",
])
def test_indirect_forbidden_constructs_are_rejected(snippet):
    code, _ = inside_block(snippet)
    assert _rules(code) & {"forbidden", "host-collective", "extern"}


def test_line_numbers_survive_splices_and_digraphs():
    code, line = inside_block("static void f() { sys\\\ncall(1); }")
    result = check_static(code)
    hits = [v for v in result.data["violations"] if v["rule"] == "forbidden"]
    assert hits and hits[0]["line"] == line
    assert normalise("a\\\nb\nc").split("\n") == ["ab", "", "c"]
    assert normalise("%:include <x> <% %> <: :>") == "#include <x> { } [ ]"


def test_the_good_candidate_still_passes_after_normalising():
    assert check_static(GOOD).passed


def test_compile_log_never_quotes_a_file_that_is_not_the_candidate():
    """A recorded nvcc log of a candidate that included /etc/passwd: its lines must not come back."""
    recorded = ("/etc/passwd(1): error: expected a declaration\n"
                "  root:x:0:0:root:/root:/bin/bash\n"
                "  ^\n\n"
                "candidate.cu(3): error: identifier \"oops\" is undefined\n"
                "    oops();\n"
                "    ^\n")
    text = trim_log(recorded, "// line 1\n// line 2\n    oops();\n")
    assert "root:x" not in text and "/bin/bash" not in text
    assert "passwd" in text and "not shown" in text
    assert "oops" in text


def test_compile_log_keeps_where_a_header_error_is_but_not_the_headers_text():
    recorded = ("/opt/nccl/include/nccl_device/core.h(40): error: incomplete type is not allowed\n"
                "      struct ncclTeam t;\n"
                "      ^\n")
    text = trim_log(recorded, "")
    assert "core.h(40): error: incomplete type is not allowed" in text
    assert "struct ncclTeam t" not in text
