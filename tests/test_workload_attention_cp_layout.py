"""The zigzag ring layout of attention_cp (cuco/compute/attention_cp.h), compiled with g++ and run on the CPU for
W = 1, 2, 4, 8: every token's owner, the causal mask of every ring step and slice (each allowed query/key pair
attended exactly once, no other), the first own slice covering every row once, balanced causal work, and each
merge pointed at its piece's rows of the running output (bf16 or fp32). A broken layout is caught: see the broken
variants below."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.workloads.attention_cp import WORKLOAD

TEST = Path(__file__).parent / "fixtures" / "attention_cp" / "zigzag_test.cpp"
HEADER = WORKLOAD.folder / "compute" / "attention_cp.h"


def _cuda_include() -> Path:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit (cuda_runtime_api.h) on this machine")
    roots = [Path(nvcc).resolve().parent.parent, *(Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH")
                                                    if os.environ.get(v)), Path("/usr/local/cuda")]
    for root in roots:
        for inc in (root / "include", root / "targets" / "x86_64-linux" / "include"):
            if (inc / "cuda_runtime_api.h").exists():
                return inc
    pytest.skip("no cuda_runtime_api.h next to nvcc")


def _build(out: Path, header_dir: Path) -> Path:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++) on PATH")
    exe = out / "zigzag_test"
    subprocess.run([cxx, "-std=c++17", "-O2", f"-I{header_dir}", f"-I{_cuda_include()}", str(TEST), "-o", str(exe)],
                   check=True, capture_output=True, text=True, timeout=300)
    return exe


@pytest.fixture(scope="module")
def exe(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("zigzag"), HEADER.parent)


def _run(exe: Path, world: int, half: int, chunk: int, causal: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), str(world), str(half), str(chunk), str(causal)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("world", [1, 2, 4, 8])
@pytest.mark.parametrize("causal", [0, 1])
def test_layout_holds(exe, world, causal):
    half = 4
    out = _run(exe, world, half, 3, causal)
    assert out.returncode == 0 and out.stdout.startswith("OK "), out.stdout
    s = 2 * world * half
    assert int(out.stdout.split()[1]) == s * s  # every (query, key) pair of every rank was looked at


@settings(max_examples=40, deadline=None)
@given(world=st.sampled_from([1, 2, 3, 4, 8]), half=st.integers(1, 6), chunk=st.integers(1, 13),
       causal=st.integers(0, 1))
def test_layout_holds_for_any_slicing(exe, world, half, chunk, causal):
    out = _run(exe, world, half, chunk, causal)
    assert out.returncode == 0 and out.stdout.startswith("OK "), (world, half, chunk, causal, out.stdout)


def _run_broken(tmp_path, good: str, bad: str, *args: int) -> subprocess.CompletedProcess:
    """The test built against the header with `good` replaced by `bad`, run with `args` (W HALF CHUNK CAUSAL)."""
    broken = tmp_path / "include"
    broken.mkdir()
    text = HEADER.read_text()
    assert good in text
    (broken / "attention_cp.h").write_text(text.replace(good, bad))
    return _run(_build(tmp_path, broken), *args)


def test_a_broken_layout_fails(tmp_path):
    """The same test against a schedule that gives a higher rank's block the lower rank's first-half-only
    treatment must report the wrong pairs."""
    out = _run_broken(tmp_path, "return (g.causal && src < me) ? g.half : g.Sr;",
                      "return g.causal && src != me ? g.half : g.Sr;", 2, 4, 4, 1)
    assert out.returncode == 1 and "wrong number of times" in out.stdout, out.stdout


def test_merges_at_the_partials_row_offsets_fail(tmp_path):
    """A piece and its merge pointed at bf16 row offsets inside fp32 outputs (the ring's partial and running
    output) land on the wrong rows wherever a piece starts past row 0: the causal layout must report it."""
    out = _run_broken(tmp_path, "const int64_t oo = 4 * p[i].q0 * q_row_elems(g);",
                      "const int64_t oo = qo;", 4, 4, 3, 1)
    assert out.returncode == 1 and "not at the piece's rows" in out.stdout, out.stdout


@pytest.mark.parametrize("world", [1, 2])
def test_a_finish_that_ignores_the_single_step_fails(tmp_path, world):
    """At W = 1 the direct step writes bf16 O and nothing may round the stale running output over it; at W > 1 the
    rounding must run. A finish that always rounds (W = 1) or never does (W = 2) is reported."""
    bad = "return false ? 0 : round_running(g, o, work, s);" if world == 1 else "return 0;"
    out = _run_broken(tmp_path, "return single_step(g) ? 0 : round_running(g, o, work, s);", bad, world, 4, 4, 1)
    assert out.returncode == 1 and "ring_finish roundings" in out.stdout, out.stdout


def test_a_single_step_slice_written_to_the_output_fails(tmp_path):
    """At W = 1 a direct call for part of the block must be refused: written to O, the rest would never be rounded
    in."""
    out = _run_broken(tmp_path, "if (to_final && (a != 0 || b < kv_rows_needed(g, me, src) || !o_final)) return 300;",
                      "if (to_final && !o_final) return 300;", 1, 4, 3, 1)
    assert out.returncode == 1 and "not refused" in out.stdout, out.stdout


@pytest.mark.parametrize("bad, says", [
    ("return cap;", "not the fewest CTAs for its waves"),
    ("return (int)((tiles + waves) / (waves + 1));", "fewer CTAs than the cap cost a wave")])
def test_a_fused_split_that_wastes_sms_or_a_wave_fails(tmp_path, bad, says):
    """The fused form's waiting calls take the fewest CTAs that keep their waves: the whole cap (SMs the pulls could
    use, idle in the FMHA) or fewer CTAs than that (a wave more) is reported."""
    out = _run_broken(tmp_path, "return (int)((tiles + waves - 1) / waves);", bad, 2, 4, 4, 1)
    assert out.returncode == 1 and says in out.stdout, out.stdout
