"""Level 1: nvcc to a shared object, content-hash cache, trimmed errors, parallel compiles."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuco.evaluate.compile import Compiler, trim_log
from cuco.toolchain import Toolchain, ToolchainError

FIXTURES = Path(__file__).parent / "fixtures" / "evaluate"
GOOD = (FIXTURES / "good_candidate.cu").read_text()
BROKEN = (FIXTURES / "broken_candidate.cu").read_text()


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    try:
        return Toolchain.detect(need_cublas=False)
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain here: {exc}")


@pytest.fixture
def compiler(toolchain, tmp_path) -> Compiler:
    return Compiler(toolchain, cache_dir=tmp_path / "cache", jobs=2)


def test_valid_candidate_compiles_then_hits_the_cache(compiler):
    first = compiler.compile(GOOD)
    assert first.ok, first.log_excerpt
    assert not first.cached and first.so_path is not None and first.so_path.stat().st_size > 0
    assert first.so_path.read_bytes()[:4] == b"\x7fELF"
    second = compiler.compile(GOOD)
    assert second.ok and second.cached and second.so_path == first.so_path
    assert second.seconds < first.seconds / 20, (first.seconds, second.seconds)


def test_cache_key_follows_code_flags_and_arch(compiler, toolchain, tmp_path):
    base = compiler.key(GOOD)
    assert compiler.key(GOOD) == base
    assert compiler.key(GOOD + "\n") != base
    assert compiler.key(GOOD, libraries=("cublasLt",)) != base
    other_arch = Compiler(toolchain, cache_dir=tmp_path / "cache", jobs=1, arch="sm_100")
    assert other_arch.toolchain.arch == "sm_100" and other_arch.key(GOOD) != base
    flags = Compiler(toolchain, cache_dir=tmp_path / "cache", jobs=1, extra_flags=("-lineinfo",))
    assert flags.key(GOOD) != base


def test_broken_candidate_gives_a_trimmed_error_with_the_line(compiler):
    outcome = compiler.compile(BROKEN)
    assert not outcome.ok and outcome.so_path is None
    lines = outcome.log_excerpt.splitlines()
    assert lines[0].startswith("candidate.cu(7): error"), outcome.log_excerpt
    assert "scale_factor_that_does_not_exist" in lines[0]
    assert "p[i] = p[i] * scale_factor_that_does_not_exist;" in lines[1]
    assert "/" not in lines[0].split(":")[0], "absolute paths must be shortened"
    assert "warning" not in outcome.log_excerpt
    again = compiler.compile(BROKEN)
    assert again.cached and not again.ok and again.log_excerpt == outcome.log_excerpt


def test_undefined_symbol_fails_at_compile_not_at_load(compiler):
    code = GOOD.replace("  (void)ctx;\n  req->", "  (void)ctx;\n  helper_defined_nowhere();\n  req->", 1)
    code = code.replace("// EVOLVE-BLOCK-END", "void helper_defined_nowhere();\n// EVOLVE-BLOCK-END")
    outcome = compiler.compile(code)
    assert not outcome.ok
    assert "undefined reference" in outcome.log_excerpt and "helper_defined_nowhere" in outcome.log_excerpt


def test_parallel_compile_of_four_codes(compiler):
    codes = [GOOD.replace("kBlocks = 8", f"kBlocks = {n}") for n in (1, 2, 4, 16)]
    assert len(set(codes)) == 4
    outcomes = compiler.compile_many(codes + [codes[0]])
    assert all(o.ok for o in outcomes), [o.log_excerpt for o in outcomes]
    assert len({o.so_path for o in outcomes}) == 4
    assert outcomes[4].so_path == outcomes[0].so_path
    assert len(list(compiler.cache_dir.iterdir())) == 4   # the duplicate was compiled once


def test_old_nccl_is_refused_with_found_and_needed_versions(toolchain, tmp_path):
    old = attrs.evolve(toolchain, nccl=attrs.evolve(toolchain.nccl, version="2.27.7"))
    with pytest.raises(ToolchainError, match=r"NCCL 2\.27\.7 .* too old.*>= 2\.28"):
        Compiler(old, cache_dir=tmp_path)


NVCC_LOG = """\
/home/user/.cache/cuco/candidates/abc/candidate.cu(12): warning #177-D: variable "x" was declared but never referenced
    int x;
        ^

Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

/home/user/.cache/cuco/candidates/abc/candidate.cu(20): error: no suitable conversion function from "int4" to "float" exists
      float v = load4(p);
                ^
          detected during instantiation of "void k<T>(T *) [with T=float]" at line 30

/opt/very/long/site-packages/nvidia/nccl/include/nccl_device/core.h(88): error: expected a ";"
    int y
        ^

/home/user/.cache/cuco/candidates/abc/candidate.cu(31): error: identifier "a" is undefined
/home/user/.cache/cuco/candidates/abc/candidate.cu(32): error: identifier "b" is undefined
/home/user/.cache/cuco/candidates/abc/candidate.cu(33): error: identifier "c" is undefined

6 errors detected in the compilation of "/home/user/.cache/cuco/candidates/abc/candidate.cu".
"""


def test_trim_log_keeps_errors_and_drops_noise():
    source = "\n".join(f"line {i} of the source" for i in range(1, 41))
    text = trim_log(NVCC_LOG, source, max_errors=4)
    assert "warning" not in text and "Remark" not in text and "instantiation" not in text
    assert "/home/user" not in text and "/opt/very" not in text
    assert text.splitlines()[0] == ('candidate.cu(20): error: no suitable conversion function from "int4" to '
                                    '"float" exists')
    assert "    line 20 of the source" in text            # the candidate's own line, as written
    # another file's error keeps its place and message, never that file's text (it may be any file on disk)
    assert "core.h(88): error: expected a" in text and "    int y" not in text
    assert "    line 31 of the source" in text            # errors nvcc printed without context get the source line
    assert "candidate.cu(32)" in text and "candidate.cu(33)" not in text
    assert text.endswith("... and 1 more errors")


def test_trim_log_keeps_linker_and_ptxas_errors():
    log = ("ptxas error   : Entry function '_Z1kPf' uses too much shared data (0x20000 bytes, 0xc000 max)\n"
           "/usr/bin/ld: /tmp/tmpxft_1.o: in function `f':\n"
           "tmpxft_1.cudafe1.cpp:(.text+0x15): undefined reference to `g()'\n"
           "collect2: error: ld returned 1 exit status\n")
    text = trim_log(log, "")
    assert "uses too much shared data" in text and "undefined reference to `g()'" in text


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # the variable is unset for every example
@given(cpus=st.integers(1, 256), gib=st.floats(0, 4096))
def test_default_jobs_stay_within_cpus_memory_and_the_cap(cpus, gib, monkeypatch):
    from cuco.evaluate.compile import GIB_PER_JOB, MAX_DEFAULT_JOBS, default_jobs

    monkeypatch.delenv("CUCO_COMPILE_JOBS", raising=False)
    jobs = default_jobs(cpus, gib)
    assert 1 <= jobs <= max(1, min(cpus, MAX_DEFAULT_JOBS))
    assert jobs == 1 or jobs * GIB_PER_JOB <= gib


def test_default_jobs_follow_the_machine_and_the_variable(monkeypatch):
    from cuco.evaluate.compile import default_jobs

    monkeypatch.delenv("CUCO_COMPILE_JOBS", raising=False)
    assert default_jobs(2, 7.0) == 2            # the 2-core CPU machine
    assert default_jobs(64, 480.0) == 32        # a 4-GPU machine: capped
    assert default_jobs(16, 10.0) == 5          # memory bounds it
    assert default_jobs(8, None) == 8           # memory unknown: the CPUs
    monkeypatch.setenv("CUCO_COMPILE_JOBS", "3")
    assert default_jobs(64, 480.0) == 3
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("CUCO_COMPILE_JOBS", bad)
        with pytest.raises(ValueError, match="CUCO_COMPILE_JOBS"):
            default_jobs()
