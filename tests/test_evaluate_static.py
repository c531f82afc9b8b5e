"""Level 0 static checks: structure, frozen regions, forbidden constructs, entry points, speed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuco.evaluate.static import check_static, violations

FIXTURES = Path(__file__).parent / "fixtures" / "evaluate"
GOOD = (FIXTURES / "good_candidate.cu").read_text()
BLOCK_LINE = GOOD.splitlines().index("// EVOLVE-BLOCK-END") + 1  # 1-based line of the END marker


def inside_block(snippet: str) -> tuple[str, int]:
    """GOOD with `snippet` (one line) inserted just before the END marker, and that line's number."""
    lines = GOOD.splitlines(keepends=True)
    lines.insert(BLOCK_LINE - 1, snippet + "\n")
    return "".join(lines), BLOCK_LINE


def test_good_candidate_passes_with_and_without_parent():
    result = check_static(GOOD)
    assert result.passed, result.reason
    assert result.level == "static" and result.data["blocks"] == 1
    assert check_static(GOOD, parent_code=GOOD).passed


@pytest.mark.parametrize("snippet, word", [
    ('static int f0() { return system("ls"); }', "system"),
    ('static void f1() { popen("ls", "r"); }', "popen"),
    ("static int f2() { return fork(); }", "fork"),
    ("static int f3(char** a) { return execve(a[0], a, 0); }", "execve"),
    ('static void* f4() { return fopen("/etc/passwd", "r"); }', "fopen"),
    ('static int f5() { return open("/tmp/x", 0); }', "open"),
    ("static int f6() { return socket(2, 1, 0); }", "socket"),
    ("static int f7(int s) { return connect(s, 0, 0); }", "connect"),
    ('static void* f8() { return dlopen("libx.so", 1); }', "dlopen"),
    ('static const char* f9() { return getenv("HOME"); }', "getenv"),
    ('static int f10() { return setenv("A", "B", 1); }', "setenv"),
    ("__device__ long long f11() { return clock64(); }", "clock64"),
    ("static long f12() { return (long)clock(); }", "clock"),
    ("static void f13() { cudaDeviceReset(); }", "cudaDeviceReset"),
    ("static void f14() { exit(1); }", "exit"),
    ("static void f15() { abort(); }", "abort"),
    ("static void f16() { cudaStream_t s; cudaStreamCreate(&s); }", "cudaStreamCreate"),
    ("static void f17() { cudaStream_t s; cudaStreamCreateWithPriority(&s, 0, -1); }", "cudaStreamCreateWithPriority"),
    ("static void f18() { std::exit(0); }", "exit"),
])
def test_forbidden_call_rejected_with_line(snippet, word):
    code, line = inside_block(snippet)
    result = check_static(code)
    assert not result.passed
    hits = [v for v in result.data["violations"] if v["rule"] == "forbidden"]
    assert hits and hits[0]["line"] == line, result.reason
    assert word in hits[0]["message"]
    assert f"line {line}: {word}" in result.reason


@pytest.mark.parametrize("snippet, rule", [
    ('__device__ unsigned long long t0() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" '
     ': "=l"(t)); return t; }', "clock-asm"),
    ('__device__ unsigned t1() { unsigned t; asm("mov.u32 %0, %%clock;" : "=r"(t)); return t; }', "clock-asm"),
    ('__device__ unsigned long long t2() { unsigned long long t; asm volatile("mov.u64 %0, %%global" "timer;" '
     ': "=l"(t)); return t; }', "clock-asm"),
    ("#include <fstream>", "include"),
    ('#include "helper.cuh"', "include"),
    ("#include <unistd.h>", "include"),
    ("extern int harness_iterations;", "extern"),
    ('extern "C" int cuco_workload_check(cuco_ctx* c, uint64_t s, cuco_check_result* r) { return 0; }',
     "abi-symbol"),
    ("static int cuco_harness_flag = 1;", "abi-symbol"),
    ("static void poke(cuco_ctx* c) { c->stream = 0; }", "harness-state"),
    ("static void poke2(cuco_ctx* c) { c->buffers[1].ptr = c->buffers[0].ptr; }", "harness-state"),
    ("static void poke3(cuco_ctx* c) { c->iteration++; }", "harness-state"),
    ("#define CAT(a, b) a##b", "token-paste"),
])
def test_forbidden_construct_rejected_with_line(snippet, rule):
    code, line = inside_block(snippet)
    found = [v for v in violations(code) if v.rule == rule]
    assert found, f"{rule} not found in {violations(code)}"
    assert found[0].line == line


def test_allowed_lookalikes_pass():
    snippets = [
        '// system("ls"); fopen(); clock64(); exit(1);',
        '/* popen("x") and %globaltimer */ static const char* kMsg = "fork() and getenv(HOME) in a string";',
        'static const char* kRaw = R"x(exit(1); "dlopen" )x";',
        'static const char kQuote = \'"\';  static const char* kAfter = "system";',
        "static int kSignal = 3; static int use_signal() { return kSignal + 1; }",
        "static void candidate_state_ok(cuco_ctx* c) { c->candidate_state = nullptr; int r = c->rank; (void)r; }",
        "static bool ranks_equal(const cuco_ctx* c) { return c->rank == 0 && c->world >= 1; }",
        "template <class T> static int use_member(T& o, T* p) { return o.open(1) + p->connect(2); }",
        'static const char* kInc = "#include <fstream>";',
        'extern __shared__ float smem[];',
        "static unsigned kMask = 0xEC1Fu; // hex digits that spell nothing",
    ]
    code, _ = inside_block("\n".join(snippets))
    result = check_static(code)
    assert result.passed, result.reason


def test_tampered_frozen_region_rejected_with_line():
    lines = GOOD.splitlines(keepends=True)
    target = next(i for i, l in enumerate(lines) if "req->lsa_barrier_count" in l)
    lines[target] = lines[target].replace("kBlocks", "kBlocks * 2")
    result = check_static("".join(lines), parent_code=GOOD)
    assert not result.passed
    v = result.data["violations"][0]
    assert v["rule"] == "frozen-region" and v["line"] == target + 1
    assert "kBlocks * 2" in result.reason


def test_edit_inside_block_keeps_frozen_regions():
    child = GOOD.replace("static const int kBlocks = 8;", "static const int kBlocks = 16;  // more CTAs")
    assert child != GOOD
    assert check_static(child, parent_code=GOOD).passed


def test_trailing_newline_is_not_an_edit_but_an_added_block_is():
    assert check_static(GOOD.rstrip("\n"), parent_code=GOOD).passed
    extra = GOOD + "// EVOLVE-BLOCK-START\nstatic int kMore = 1;\n// EVOLVE-BLOCK-END\n"
    result = check_static(extra, parent_code=GOOD)
    assert not result.passed and "2 EVOLVE blocks but its parent has 1" in result.reason


@pytest.mark.parametrize("mutate, expect", [
    (lambda c: c.replace("// EVOLVE-BLOCK-END\n", ""), "never closed"),
    (lambda c: c.replace("// EVOLVE-BLOCK-START\n", ""), "without a matching"),
    (lambda c: c.replace("// EVOLVE-BLOCK-START\n", "").replace("// EVOLVE-BLOCK-END\n", ""), "no EVOLVE block"),
    (lambda c: c.replace("static const int kBlocks", "// EVOLVE-BLOCK-START\nstatic const int kBlocks"), "do not nest"),
    (lambda c: c.replace("// EVOLVE-BLOCK-END", "/* // EVOLVE-BLOCK-END */"), "never closed"),
])
def test_broken_markers_rejected(mutate, expect):
    code = mutate(GOOD)
    assert code != GOOD
    result = check_static(code)
    assert not result.passed
    assert expect in result.reason
    assert any(v["rule"] == "markers" for v in result.data["violations"])


def test_entry_points_must_exist_with_c_linkage():
    no_launch = GOOD.replace("cuco_candidate_launch", "my_launch")
    assert "cuco_candidate_launch is not defined" in check_static(no_launch).reason
    cpp_linkage = GOOD.replace('extern "C" int cuco_candidate_requirements', "int cuco_candidate_requirements")
    result = check_static(cpp_linkage)
    assert not result.passed and "must have C linkage" in result.reason
    block = GOOD.replace('extern "C" int cuco_candidate_requirements', 'extern "C" {\nint cuco_candidate_requirements')
    block = block.replace("  return 0;\n}\n\nextern \"C\" int cuco_candidate_launch", "  return 0;\n}\n}\n\nextern \"C\" int cuco_candidate_launch")
    assert block.count('extern "C" {') == 1
    assert check_static(block).passed, check_static(block).reason


def test_reason_lists_several_violations_in_line_order():
    code, line = inside_block('static void bad() { system("a"); fopen("b", "r"); exit(0); }')
    result = check_static(code)
    assert [v["line"] for v in result.data["violations"]] == [line, line, line]
    assert result.reason.count(f"line {line}:") == 3


def test_a_thousand_line_file_passes():
    body = "".join(f"__device__ inline float f{i}(float x) {{ return x * {i}.0f + 1.0f; }}  // step {i}\n"
                   for i in range(1000))
    code = GOOD.replace("static const int kBlocks = 8;", body + "static const int kBlocks = 8;")
    assert len(code.splitlines()) > 1000
    result = check_static(code, GOOD)
    assert result.passed, result.reason


def test_a_host_seed_may_go_without_blocks_but_not_without_the_other_rules():
    seed = (FIXTURES / "ag_host_seed.cu").read_text()
    assert "no EVOLVE block" in check_static(seed).reason
    assert check_static(seed, require_blocks=False).passed
    bad = seed.replace("(void)req;", "(void)req; system(\"ls\");")
    assert not check_static(bad, require_blocks=False).passed
    unbalanced = seed + "// EVOLVE-BLOCK-START\n"
    assert "never closed" in check_static(unbalanced, require_blocks=False).reason


def test_host_collectives_rejected_in_candidates_but_not_in_seeds() -> None:
    seed_body = "ncclAllGather(a, b, n, ncclBfloat16, ctx->comm, ctx->stream);"
    candidate = GOOD.replace("// EVOLVE-BLOCK-END", f"void f(cuco_ctx* ctx) {{ {seed_body} }}\n// EVOLVE-BLOCK-END", 1)
    result = check_static(candidate)
    assert not result.passed and "ncclAllGather: a device-initiated candidate" in result.reason
    # a comment or a member named like a collective is not a call
    benign = GOOD.replace("// EVOLVE-BLOCK-END", "// ncclSend(x) is gone\nvoid g(T t) { t.ncclSend (1); }\n"
                          "// EVOLVE-BLOCK-END", 1)
    assert "host-collective" not in str(check_static(benign).data["violations"])
