"""cuco.builder: one key recipe that tells every input apart, one build per key across threads, the artefact
published whole."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import attrs
import pytest

from cuco.builder import build, build_key, include_identity, is_cached
from cuco.libraries import Library
from cuco.toolchain import CompileResult, Toolchain

FIXTURES = Path(__file__).parent / "fixtures" / "evaluate"


@pytest.fixture
def tc(tmp_path) -> Toolchain:
    # a toolchain described, not detected: the key needs only its fingerprint and flags
    nccl = Library("nccl", tmp_path / "nccl", tmp_path / "nccl", "nccl", "2.28.9", "env")
    return Toolchain(nvcc=tmp_path / "nvcc", cuda_version="13.0", cuda_home=tmp_path, nccl=nccl, arch="sm_90")


def test_every_input_of_a_build_changes_its_key(tc, tmp_path):
    inc = tmp_path / "inc"
    (inc / "cuco" / "compute").mkdir(parents=True)
    nested = inc / "cuco" / "compute" / "w.h"
    nested.write_text("int f();")
    base = dict(flags=["-DX"], libraries=["cutlass"], includes=[include_identity(inc, recursive=True)])
    key = build_key("shared", tc, [("a.cu", "int x;")], **base)
    assert key == build_key("shared", tc, [("a.cu", "int x;")], **base)  # deterministic
    others = [
        build_key("candidate", tc, [("a.cu", "int x;")], **base),
        build_key("shared", attrs.evolve(tc, arch="sm_100"), [("a.cu", "int x;")], **base),
        build_key("shared", tc, [("a.cu", "int y;")], **base),
        build_key("shared", tc, [("b.cu", "int x;")], **base),
        build_key("shared", tc, [("a.cu", "int x;")], **{**base, "flags": ["-DY"]}),
        build_key("shared", tc, [("a.cu", "int x;")], **{**base, "libraries": []}),
        build_key("shared", tc, [("a.cu", "int x;")], **{**base, "includes": []}),
        # one string moved from the flags to the libraries: the lists are delimited, not concatenated
        build_key("shared", tc, [("a.cu", "int x;")], flags=[], libraries=["-DX", "cutlass"],
                  includes=base["includes"]),
    ]
    assert len({key, *others}) == len(others) + 1
    nested.write_text("int g();")       # a header reached as <cuco/compute/w.h>, below the include folder
    assert build_key("shared", tc, [("a.cu", "int x;")], flags=["-DX"], libraries=["cutlass"],
                     includes=[include_identity(inc, recursive=True)]) != key


def test_parallel_callers_of_one_key_build_once(tmp_path):
    made: list[int] = []

    def make(output: Path) -> CompileResult:
        made.append(1)
        time.sleep(0.2)  # a compile takes time: the other callers wait on the key's lock meanwhile
        output.write_bytes(b"\x7fELF")
        return CompileResult(True, output, "", 0.2, ("nvcc",))

    results: list[CompileResult] = []
    threads = [threading.Thread(target=lambda: results.append(build(tmp_path / "k", "lib.so", make)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1
    assert sorted(is_cached(r) for r in results) == [False, True, True, True]
    assert all(r.ok and r.output == tmp_path / "k" / "lib.so" for r in results)


def test_a_failed_build_publishes_nothing_and_runs_again(tmp_path):
    calls: list[int] = []

    def fail(output: Path) -> CompileResult:
        calls.append(1)
        return CompileResult(False, output, "error", 0.0, ("nvcc",))

    assert not build(tmp_path / "k", "lib.so", fail).ok
    assert not build(tmp_path / "k", "lib.so", fail).ok
    assert len(calls) == 2 and not (tmp_path / "k" / "lib.so").exists()


def test_two_compilers_of_one_program_compile_it_once(tmp_path):
    from cuco.evaluate.compile import Compiler
    from conftest import toolchain_or_skip

    tc = toolchain_or_skip()
    code = (FIXTURES / "good_candidate.cu").read_text()
    outcomes = []
    compilers = [Compiler(tc, cache_dir=tmp_path / "cache", jobs=1) for _ in range(2)]  # as two processes would
    threads = [threading.Thread(target=lambda c=c: outcomes.append(c.compile(code))) for c in compilers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o.ok for o in outcomes), [o.log_excerpt for o in outcomes]
    assert sorted(o.cached for o in outcomes) == [False, True]   # the second waited for the first's artefact
    assert not list((tmp_path / "cache").glob("*/.*.tmp"))


def test_the_lock_of_a_swept_entry_goes_with_it(tmp_path):
    from cuco.evaluate.compile import sweep_cache

    def make(output: Path) -> CompileResult:
        output.write_bytes(b"x" * 100)
        return CompileResult(True, output, "", 0.0, ("nvcc",))

    build(tmp_path / "key", "candidate.so", make)
    sweep_cache(tmp_path, max_bytes=0)
    assert list(tmp_path.iterdir()) == []   # no key.lock left beside the removed entry
