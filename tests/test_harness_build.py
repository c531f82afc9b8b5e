"""CPU tests: the harness binary and every test fixture compile (nvcc + NCCL headers from the wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import attrs
import pytest

from cuco.harness import BuildError, HarnessRequest, build_shared, compile_shared, harness_binary, include_dir, run_harness
from cuco.harness.build import harness_sources
from cuco.harness.runner import gpu_count
from cuco.toolchain import Toolchain, ToolchainError

FIXTURES = Path(__file__).parent / "fixtures" / "harness"
CANDIDATES = ["good_lsa", "nccl_allgather", "deadlock", "wrong_values", "prints_pass", "illegal_address",
              "needs_gin", "missing_launch", "host_epoch_flag", "syncs_in_launch"]

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUCO_NVCC"),
                                reason="needs nvcc (CUDA toolkit) to compile the harness")


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    try:
        return Toolchain.detect()
    except ToolchainError as exc:
        pytest.skip(f"toolchain incomplete: {exc}")


def test_harness_sources_are_small_files() -> None:
    sources = harness_sources()
    assert any(p.name == "main.cpp" for p in sources)
    for p in sources:
        assert len(p.read_text().splitlines()) < 400, f"{p.name} has grown past 400 lines: split it"


def test_harness_binary_builds_once_and_is_cached(toolchain: Toolchain) -> None:
    binary = harness_binary(toolchain)
    assert binary.is_file() and os.access(binary, os.X_OK)
    start = time.monotonic()
    assert harness_binary(toolchain) == binary
    assert time.monotonic() - start < 2.0


def test_harness_binary_rejects_bad_command_lines(toolchain: Toolchain) -> None:
    binary = harness_binary(toolchain)
    proc = subprocess.run([str(binary), "--world", "2"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--workload is required" in proc.stderr
    proc = subprocess.run([str(binary), "--workload", "w.so", "--dims", "4", "--world", "2", "--devices", "0",
                           "--out", "x.json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "one device per rank" in proc.stderr
    proc = subprocess.run([str(binary), "--bogus", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown flag --bogus" in proc.stderr
    proc = subprocess.run([str(binary), "--workload", "w.so", "--dims", "4", "--world", "1", "--delay-comm-us", "2000000",
                           "--out", "x.json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--delay-comm-us must be between 0 and 1000000" in proc.stderr
    for value, message in (("-3", "--graph-replays must be between 0 (off) and 100000, got '-3'"),
                           ("many", "--graph-replays takes an integer, got 'many'")):
        proc = subprocess.run([str(binary), "--workload", "w.so", "--dims", "4", "--world", "1", "--graph-replays",
                               value, "--out", "x.json"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    for value, message in (("61000", "--warm-ms must be at most 60000"),
                           ("-1", "--warm-ms takes a non-negative number, got '-1'")):
        proc = subprocess.run([str(binary), "--workload", "w.so", "--dims", "4", "--world", "1", "--warm-ms",
                               value, "--out", "x.json"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    proc = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    assert "[--graph-replays 0]" in proc.stderr and "[--warm-ms 0]" in proc.stderr
    assert "[--launches-per-iteration 1]" in proc.stderr


@pytest.mark.parametrize("name", ["copy_workload", *CANDIDATES])
def test_fixture_compiles(toolchain: Toolchain, name: str) -> None:
    libs = ("cublasLt",) if name == "copy_workload" else ()
    so = build_shared(FIXTURES / f"{name}.cu", libs, toolchain=toolchain)
    assert so.is_file() and so.suffix == ".so"
    nm = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
    if name == "copy_workload":
        for sym in ("cuco_workload_describe", "cuco_workload_fill", "cuco_workload_check", "cuco_workload_parts"):
            assert sym in nm
    else:
        assert "cuco_candidate_requirements" in nm
        assert ("cuco_candidate_launch" in nm) == (name != "missing_launch")


def test_build_shared_from_code_is_cached_by_content(toolchain: Toolchain) -> None:
    code = '#include "cuco/abi.h"\nextern "C" int cuco_candidate_requirements(const cuco_ctx*, cuco_requirements*) { return 0; }\n'
    a = build_shared(code, toolchain=toolchain, name="cached_probe")
    assert build_shared(code, toolchain=toolchain, name="cached_probe") == a
    b = build_shared(code + "// changed\n", toolchain=toolchain, name="cached_probe")
    assert b != a and b.is_file()


def test_build_shared_reports_compile_errors(toolchain: Toolchain) -> None:
    with pytest.raises(BuildError) as err:
        build_shared('extern "C" int broken( { return 0; }\n', toolchain=toolchain, name="broken")
    assert "error" in err.value.log and "broken" in str(err.value)
    result = compile_shared('extern "C" int broken2( { return 0; }\n', toolchain=toolchain, name="broken2")
    assert not result.ok and "error" in result.log


def test_a_build_error_says_the_first_errors_at_their_lines_without_cache_paths(toolchain: Toolchain) -> None:
    from cuco.toolchain import cache_dir

    code = 'extern "C" int ok() { return 0; }\nextern "C" int broken3( { return 0; }\n'
    with pytest.raises(BuildError) as err:
        build_shared(code, toolchain=toolchain, name="broken3")
    message = str(err.value)
    assert "broken3.cu(2): error" in message and 'extern "C" int broken3( { return 0; }' in message
    assert str(cache_dir()) not in message        # the log is trimmed as a candidate's is: paths shortened
    assert str(cache_dir()) in err.value.log      # the whole log is kept


def test_build_shared_missing_file_is_a_clear_error(toolchain: Toolchain) -> None:
    with pytest.raises(BuildError, match="does not exist"):
        build_shared(FIXTURES / "no_such_candidate.cu", toolchain=toolchain)


@attrs.frozen
class CountingToolchain:
    """Test double: delegates to a real Toolchain and counts compile calls."""

    inner: Toolchain
    calls: list = attrs.field(factory=list)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)  # the key reads its fingerprint, flags and link flags

    def compile(self, *args, **kwargs):
        self.calls.append(args)
        return self.inner.compile(*args, **kwargs)


def test_parallel_callers_compile_once(toolchain: Toolchain) -> None:
    counting = CountingToolchain(toolchain)
    code = f'extern "C" int cuco_probe_{time.time_ns()}() {{ return 0; }}\n'
    paths: list[Path] = []
    threads = [threading.Thread(target=lambda: paths.append(build_shared(code, toolchain=counting, name="par")))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and len(paths) == 3
    assert len(counting.calls) == 1


def test_include_dir_has_the_abi() -> None:
    assert (include_dir() / "cuco" / "abi.h").is_file()
    assert (include_dir() / "cuco" / "gen.cuh").is_file()


@pytest.mark.skipif(gpu_count() > 0, reason="checks the no-GPU path; this machine has GPUs")
def test_harness_without_gpu_writes_an_error_result(toolchain: Toolchain, tmp_path: Path) -> None:
    plugin = build_shared(FIXTURES / "copy_workload.cu", ("cublasLt",), toolchain=toolchain)
    cand = build_shared(FIXTURES / "nccl_allgather.cu", toolchain=toolchain)
    res = run_harness(HarnessRequest(plugin, [cand, cand], dims=(1024,), world=2, timeout_s=30), toolchain)
    assert res.status == "error" and res.processes == 1
    assert "CUDA error" in res.message
    assert [c.status for c in res.candidates] == ["not_run", "not_run"]


@pytest.mark.skipif(not os.environ.get("CUCO_TEST_OTHER_NCCL_HOME"),
                    reason="set CUCO_TEST_OTHER_NCCL_HOME to a second NCCL install (include/, lib/) to compile "
                           "the harness and fixtures against it as well (e.g. 2.28.9 next to 2.32.x)")
def test_compiles_against_another_nccl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NCCL_HOME", os.environ["CUCO_TEST_OTHER_NCCL_HOME"])
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path))
    tc = Toolchain.detect()
    assert tc.nccl.origin == "env"
    assert harness_binary(tc).is_file()
    for name in ("copy_workload", "good_lsa", "deadlock", "needs_gin"):
        assert build_shared(FIXTURES / f"{name}.cu", ("cublasLt",), toolchain=tc).is_file()


def test_full_entropy_seeds_cross_the_command_line_and_the_result_whole(toolchain: Toolchain) -> None:
    """The top bit of a seed selects full-entropy inputs (cuco/gen.cuh): the harness parses the whole 64-bit seed
    and writes it back unchanged (a signed parse or writer broke both at 2^63)."""
    from cuco.harness.runner import FULL_ENTROPY_SEED

    plugin = build_shared(FIXTURES / "copy_workload.cu", ("cublasLt",), toolchain=toolchain)
    cand = build_shared(FIXTURES / "nccl_allgather.cu", toolchain=toolchain)
    res = run_harness(HarnessRequest(plugin, [cand], dims=(1024,), world=1, seeds=(1, 2), inputs="full",
                                     timeout_s=30), toolchain)
    assert res.seeds == (FULL_ENTROPY_SEED | 1, FULL_ENTROPY_SEED | 2), res.seeds
    binary = harness_binary(toolchain)
    proc = subprocess.run([str(binary), "--workload", "w.so", "--dims", "4", "--seeds", "-1", "--out", "x.json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--seeds takes comma-separated non-negative integers" in proc.stderr
    with pytest.raises(ValueError, match="inputs"):
        HarnessRequest(plugin, [cand], dims=(1024,), inputs="randn")
