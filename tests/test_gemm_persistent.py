"""Bad input to GEMM+AllGather's persistent GEMM is rejected with its reason before anything launches.

The C checks (`cuco_ag_gemm_check`, ag_gemm.cu) are compiled without CUTLASS and called through ctypes; the
CUTLASS entry points are replaced by mocks that record a launch, so a rejected call provably launched nothing.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

from cuco.toolchain import Toolchain, ToolchainError
from cuco.workload import Shape, ShapeError
from cuco.workloads.gemm_allgather import check_shape
from cuco.workloads.gemm_allgather.compute import ALIGN_ELEMENTS, ROWS_PER_CLUSTER, TILE_M, persistent_gemm_reason

COMPUTE = Path(__file__).resolve().parents[1] / "src/cuco/workloads/gemm_allgather/compute"
ISSUE_SHAPES = ((8192, 8192, 8192), (16384, 8192, 3584), (4096, 4096, 4096), (32768, 8192, 8192),
                (12288, 5120, 5120), (2048, 8192, 28672))


@pytest.mark.parametrize("m,k,n", ISSUE_SHAPES)
@pytest.mark.parametrize("world", (1, 2, 4, 8))
def test_issue_shapes_are_accepted(m, k, n, world):
    assert persistent_gemm_reason(m, k, n, world) is None


@pytest.mark.parametrize("m,k,n,world,needle", [
    (384, 256, 256, 1, "M % 256"),          # odd number of 128-row tiles: the rotation would move a phantom tile
    (768, 256, 256, 4, "M/world % 128"),     # a rank's rows start mid-tile
    (512, 100, 256, 2, "K % 8"),            # 200-byte rows: no TMA
    (512, 256, 1001, 2, "N % 8"),
    (0, 256, 256, 1, "1..2^31-1"),
    (512, 256, 256, 0, "at least one rank"),
])
def test_bad_shapes_name_the_violated_rule(m, k, n, world, needle):
    reason = persistent_gemm_reason(m, k, n, world)
    assert reason is not None and needle in reason


def test_workload_shape_check_rejects_what_the_persistent_gemm_cannot_run():
    with pytest.raises(ShapeError, match="M % 256"):
        check_shape(Shape((384, 256, 256)), 1)
    check_shape(Shape((512, 256, 384)), 2)


def test_python_rules_mirror_the_c_checks():
    src = (COMPUTE / "ag_gemm.cu").read_text()
    consts = dict(re.findall(r"(kTileM|kRowsPerCluster|kAlign) = (\d+)", src))
    assert int(consts["kTileM"]) == TILE_M
    assert int(consts["kRowsPerCluster"]) == ROWS_PER_CLUSTER
    assert int(consts["kAlign"]) == ALIGN_ELEMENTS


class Args(ctypes.Structure):
    """Mirror of cuco_ag_gemm_args (ag_gemm.h); its size is checked against the C struct."""

    _fields_ = [("A", ctypes.c_void_p), ("B", ctypes.c_void_p), ("C", ctypes.c_void_p),
                ("M", ctypes.c_int64), ("N", ctypes.c_int64), ("K", ctypes.c_int64),
                ("lda", ctypes.c_int64), ("ldb", ctypes.c_int64), ("ldc", ctypes.c_int64),
                ("local_row_begin", ctypes.c_int64), ("local_row_end", ctypes.c_int64), ("order", ctypes.c_int),
                ("flags", ctypes.c_void_p), ("epoch", ctypes.c_uint32), ("epoch_at", ctypes.c_void_p),
                ("rows_per_rank", ctypes.c_int64),
                ("chunk_rows", ctypes.c_int64), ("chunks_per_rank", ctypes.c_int), ("sm_count", ctypes.c_int),
                ("config", ctypes.c_int), ("swizzle", ctypes.c_int)]


# Mocks of the CUTLASS entry points: they count launches and never touch a GPU.
MOCK_LAUNCHERS = r"""
#include "ag_gemm.h"
#include <stddef.h>
static int g_launches = 0;
namespace cuco_ag_gemm {
int run_coop128x256(const cuco_ag_gemm_args*, int, cudaStream_t) { return ++g_launches, 0; }
int run_pingpong128x128(const cuco_ag_gemm_args*, int, cudaStream_t) { return ++g_launches, 0; }
}
extern "C" int mock_launches() { return g_launches; }
extern "C" size_t args_size() { return sizeof(cuco_ag_gemm_args); }
"""


@pytest.fixture(scope="module")
def checks(tmp_path_factory) -> ctypes.CDLL:
    try:
        tc = Toolchain.detect(arch="sm_90")
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    d = tmp_path_factory.mktemp("ag_gemm_checks")
    (d / "mock_launchers.cu").write_text(MOCK_LAUNCHERS)
    out = d / "libchecks.so"
    result = tc.compile([COMPUTE / "ag_gemm.cu", d / "mock_launchers.cu"], out, include_dirs=[COMPUTE])
    assert result.ok, result.log
    lib = ctypes.CDLL(str(out))
    lib.cuco_ag_gemm_check.argtypes = [ctypes.POINTER(Args), ctypes.c_char_p, ctypes.c_int]
    lib.cuco_ag_gemm_persistent.argtypes = [ctypes.POINTER(Args), ctypes.c_void_p]
    lib.args_size.restype = ctypes.c_size_t
    assert lib.args_size() == ctypes.sizeof(Args)
    return lib


def good_args() -> Args:
    a = Args(A=0x10000, B=0x20000, C=0x30000, M=1024, N=512, K=256, lda=256, ldb=512, ldc=512,
             local_row_begin=512, local_row_end=1024, order=1, flags=0x40000, epoch=3, rows_per_rank=512,
             chunk_rows=128, chunks_per_rank=4, sm_count=0, config=0, swizzle=4)
    return a


def check(lib: ctypes.CDLL, a: Args) -> tuple[int, str]:
    buf = ctypes.create_string_buffer(400)
    rc = lib.cuco_ag_gemm_check(ctypes.byref(a), buf, len(buf))
    return rc, buf.value.decode()


def test_good_arguments_pass_the_check(checks):
    assert check(checks, good_args()) == (0, "")


@pytest.mark.parametrize("field,value,needle", [
    ("A", 0x10008, "16-byte aligned"),
    ("C", 0, "not NULL"),
    ("M", 384, "multiple of 256"),
    ("K", 0, "M, N, K must be"),
    ("lda", 200, "leading dimensions"),
    ("ldb", 500, "leading dimensions"),
    ("local_row_begin", 64, "multiples of 128"),
    ("local_row_end", 2048, "multiples of 128"),
    ("order", 2, "order must be"),
    ("chunks_per_rank", 3, "chunks_per_rank=3"),
    ("rows_per_rank", 384, "must divide M"),
    ("config", 2, "config=2"),
    ("swizzle", 3, "swizzle"),
    ("sm_count", 1, "sm_count"),
])
def test_bad_arguments_are_rejected_with_the_fix_and_never_launched(checks, field, value, needle):
    a = good_args()
    setattr(a, field, value)
    rc, why = check(checks, a)
    assert rc != 0 and needle in why
    before = checks.mock_launches()
    assert checks.cuco_ag_gemm_persistent(ctypes.byref(a), None) == rc
    assert checks.mock_launches() == before


def test_the_tuned_configuration_passes_the_check_and_others_outside_the_enum_do_not(checks):
    a = good_args()
    a.config = -1  # CUCO_AG_TUNED: what cuco_ag_gemm_tune chose, the swizzle its cap
    assert check(checks, a) == (0, "")
    a.config = -2
    rc, why = check(checks, a)
    assert rc == 11 and "CUCO_AG_TUNED" in why


@pytest.mark.parametrize("max_swizzle, field, value, code", [
    (3, None, None, 16),     # not 1, 2, 4 or 8
    (4, "M", 384, 6),        # the call itself is bad: the check's code
])
def test_tuning_refuses_bad_input_before_any_launch(checks, max_swizzle, field, value, code):
    checks.cuco_ag_gemm_tune.argtypes = [ctypes.POINTER(Args), ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_void_p]
    a = good_args()
    if field:
        setattr(a, field, value)
    before = checks.mock_launches()
    rc = checks.cuco_ag_gemm_tune(ctypes.byref(a), max_swizzle, None, None, None)
    assert rc == code
    assert checks.mock_launches() == before


def test_flag_geometry_is_ignored_without_flags(checks):
    a = good_args()
    a.flags, a.chunks_per_rank = 0, 0
    assert check(checks, a)[0] == 0


def test_a_good_call_reaches_the_launcher(checks):
    a = good_args()
    a.sm_count = 8  # no device query on a CPU machine
    before = checks.mock_launches()
    assert checks.cuco_ag_gemm_persistent(ctypes.byref(a), None) == 0
    assert checks.mock_launches() == before + 1


@pytest.mark.slow
def test_the_kit_builds_the_library_with_the_checks_inside():
    """The workload's declared compute library builds through the kit (cached with the compile checks) and
    exports the C interface; its checks reject a bad call without a GPU."""
    from cuco.kit.compute import build_compute
    from cuco.workloads.gemm_allgather import WORKLOAD

    try:
        tc = Toolchain.detect(arch="sm_90")
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    built = build_compute(WORKLOAD, tc)
    assert (built.include_dir / "cuco/compute/gemm_allgather.h").read_text() == (COMPUTE / "ag_gemm.h").read_text()
    lib = ctypes.CDLL(str(built.library))
    lib.cuco_ag_gemm_check.argtypes = [ctypes.POINTER(Args), ctypes.c_char_p, ctypes.c_int]
    assert lib.cuco_ag_gemm_persistent  # exported
    a = good_args()
    assert check(lib, a) == (0, "")
    a.M = 384
    rc, why = check(lib, a)
    assert rc == 6 and "multiple of 256" in why


def test_committed_one_gpu_results_are_complete_and_consistent():
    """The committed measurement covers the issue's shapes, verified every scheme (the flag-ignoring fixture
    failed), and its derived figures follow from its timings."""
    import json

    doc = json.loads((COMPUTE.parents[4] / "benchmarks/results/gemm_persistent_1gpu.json").read_text())
    assert doc["environment"]["device"] and doc["date"] and doc["environment"]["cuda_runtime"]
    rows = {tuple(r["shape"]): r for r in doc["shapes"]}
    assert set(rows) == set(ISSUE_SHAPES)
    for r in rows.values():
        assert all(v["ok"] for v in r["verified"].values())
        assert r["verified"]["fixture_ignores_flags_remote_first"]["bad"] > 0
        assert r["proxy_bound_ms"] == pytest.approx(max(r["cublaslt_ms"], r["copy_alone_ms"]), abs=1e-4)
        assert r["persistent_vs_cublaslt"] == pytest.approx(r["cublaslt_ms"] / r["persistent_ms"], rel=1e-3)
        assert r["proxy_persistent_vs_bound"] == pytest.approx(r["proxy_persistent_ms"] / r["proxy_bound_ms"],
                                                               rel=1e-3)
