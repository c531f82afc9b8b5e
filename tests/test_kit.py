"""The workload kit: one template style, EVOLVE layout, declared libraries, the compute library built once."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuco import libraries
from cuco.evaluate.compile import Compiler
from cuco.kit.compute import ComputeBuildError, ComputeLibrary, _out_dir, build_compute, link_options, publish_header
from cuco.kit.evolve import EVOLVE_END, EVOLVE_START, assemble, frozen_text, split
from cuco.kit.template import TemplateError, fill
from cuco.toolchain import Toolchain, ToolchainError
from cuco.workload import Shape, Workload

FIXTURES = Path(__file__).parent / "fixtures" / "kit"


def test_fill_replaces_every_placeholder_once():
    assert fill("a @X@ b @Y_2@ @X@", {"X": 1, "Y_2": "two"}) == "a 1 b two 1"
    assert fill("no placeholders", {}) == "no placeholders"


@pytest.mark.parametrize("template, values, match", [
    ("@A@ @B@", {"A": 1}, "no value for placeholder.*@B@"),
    ("@A@", {"A": 1, "TYPO": 2}, "TYPO match no placeholder"),
    ("@A@", {"A": "carries @C@"}, "@C@ remain after filling"),
])
def test_fill_fails_on_missing_unknown_and_leftover(template, values, match):
    with pytest.raises(TemplateError, match=match):
        fill(template, values)


def test_assemble_and_split_round_trip():
    code = assemble("head\n", "// point a/b\nbody\n", "tail\n")
    assert code == f"head\n{EVOLVE_START}\n// point a/b\nbody\n{EVOLVE_END}\ntail\n"
    head, block, tail = split(code)
    assert "point a/b" in block and "point" not in head + tail
    assert frozen_text(code) == frozen_text(assemble("head", "other", "tail\n"))
    with pytest.raises(TemplateError, match="EVOLVE marker"):
        assemble(EVOLVE_START, "", "")
    with pytest.raises(TemplateError, match="without a matching"):
        split(f"{EVOLVE_END}\n{EVOLVE_START}\n")


def test_cutlass_headers_found_without_importing_the_package():
    import sys

    spec = libraries.spec_of("cutlass")
    try:
        lib = libraries.find(spec, None)
    except libraries.LibraryError as exc:
        pytest.skip(f"nvidia-cutlass not installed: {exc}")
    assert (lib.include / "cutlass" / "cutlass.h").is_file() and lib.link_name == ""
    assert any((d / "cutlass" / "util").is_dir() for d in lib.more_includes)
    assert "cutlass_library" not in sys.modules
    assert f"-I{lib.include}" in lib.flags() and not any(f.startswith("-l") for f in lib.flags())


def test_cublaslt_wheel_headers_never_shadow_the_toolkits(tmp_path):
    """The cu13 wheel's include dir also ships CCCL and nv/ headers: it is searched after the toolkit's (-isystem),
    so CUTLASS and cuBLASLt compile in one translation unit."""
    lib = libraries.Library("cublasLt", tmp_path / "inc", tmp_path / "lib", "libcublasLt.so", "", "wheel",
                            system_include=libraries.spec_of("cublasLt").system_include)
    assert lib.flags()[0] == f"-isystem={tmp_path / 'inc'}" and f"-L{tmp_path / 'lib'}" in lib.flags()
    assert libraries.Library("x", tmp_path, None, "", "", "env").flags() == [f"-I{tmp_path}"]


def test_space_pieces_follow_the_topology():
    from cuco.design_space import DesignSpace, Directives, Topology
    from cuco.kit.space import backends_for, lsa_one_node

    offered = ("lsa", "gin", "nvshmem")
    assert backends_for(Topology(world=2), offered) == offered
    assert backends_for(Topology(world=2, gin_available=False, nvshmem_available=False), offered) == ("lsa",)
    assert backends_for(Topology(world=16, nodes=2), offered) == ("gin", "nvshmem")
    assert backends_for(Topology(world=16, nodes=2, gin_available=False), ("lsa",)) == ("gin",)
    rule = lsa_one_node("x-lsa", "pulls rows")
    point = Directives.from_label("lsa/deferred/world/cta/whole")
    assert rule.check(point, DesignSpace(topology=Topology(world=2))) is None
    reason = rule.check(point, DesignSpace(topology=Topology(world=16, nodes=2)))
    assert reason and "pulls rows" in reason and "2 nodes" in reason


def test_unknown_library_names_the_registry(monkeypatch):
    with pytest.raises(libraries.LibraryError, match="unknown library 'nope'.*register"):
        libraries.spec_of("nope")
    monkeypatch.setattr(libraries, "site_dirs", lambda: [])
    monkeypatch.delenv("CUDNN_HOME", raising=False)
    with pytest.raises(libraries.LibraryError, match="pip install nvidia-cudnn"):
        libraries.find(libraries.spec_of("cudnn"), Path("/nonexistent"))
    with pytest.raises(libraries.LibraryError, match="registered differently"):
        libraries.register(libraries.LibrarySpec("cublasLt", "other.h"))


# ---- the compute library (nvcc) ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    try:
        return Toolchain.detect(arch="sm_90")
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")


def _workload(folder: Path, compute: ComputeLibrary) -> Workload:
    return Workload(name="kit_scale", description="", dim_names=("N",), verify_shapes=(Shape((1,)),),
                    bench_shapes=(Shape((1,)),), folder=folder, plugin_source="p.cu", seed_source="s.cu",
                    space=lambda t: None, render=lambda d: "", check_shape=lambda s, w: None,
                    flops=lambda s, w: 0.0, comm_bytes=lambda s, w: 0.0, compute=compute)


CANDIDATE = """
#include "cuco/abi.h"
#include "cuco/compute/kit_scale.h"
extern "C" int cuco_candidate_requirements(const cuco_ctx*, cuco_requirements*) { return 0; }
extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  return kit_scale((const float*)ctx->buffers[0].ptr, (float*)ctx->buffers[1].ptr, 2.0f, 16, ctx->stream);
}
"""


def test_compute_library_builds_once_and_candidates_link_it(toolchain, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    wl = _workload(FIXTURES, ComputeLibrary(sources=("compute/scale.cu",), header="compute/scale.h"))
    with caplog.at_level("INFO", logger="cuco.build"):
        first = build_compute(wl, toolchain)
        said = [r.getMessage() for r in caplog.records]
        again = build_compute(wl, toolchain)
    # the minutes of a build are said before and after; a cached library says nothing
    assert len(said) == 2 and "building kit_scale's compute library" in said[0] and " built in " in said[1]
    assert len(caplog.records) == 2
    assert first.library.name == "libkit_scale_compute.so" and first.library.is_file() and not first.cached
    assert again.cached and again.library == first.library
    assert (first.include_dir / "cuco" / "compute" / "kit_scale.h").is_file()
    link = link_options(wl, toolchain)
    assert link.include_dirs == (first.include_dir,) and "-l:libkit_scale_compute.so" in link.extra
    outcome = Compiler(toolchain, cache_dir=tmp_path / "cand").compile(CANDIDATE, link.libraries, link.include_dirs,
                                                                      link.extra)
    assert outcome.ok, outcome.log_excerpt
    # Without the compute library the same candidate fails to link (--no-undefined): the link is real.
    bare = Compiler(toolchain, cache_dir=tmp_path / "bare").compile(CANDIDATE, (), link.include_dirs)
    assert not bare.ok and "kit_scale" in bare.log_excerpt


def test_header_is_published_without_building(toolchain, tmp_path, monkeypatch):
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    wl = _workload(FIXTURES, ComputeLibrary(sources=("compute/scale.cu",), header="compute/scale.h"))
    include = publish_header(wl, toolchain)
    assert (include / "cuco" / "compute" / "kit_scale.h").read_text() == (FIXTURES / "compute" / "scale.h").read_text()
    assert not list((tmp_path / "cache").rglob("*.so"))


def test_compute_library_errors_name_the_fix(toolchain, tmp_path, monkeypatch):
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ComputeBuildError, match="missing file"):
        build_compute(_workload(FIXTURES, ComputeLibrary(sources=("compute/none.cu",), header="compute/scale.h")),
                      toolchain)
    broken = tmp_path / "wl"
    (broken / "compute").mkdir(parents=True)
    (broken / "compute" / "bad.cu").write_text("this is not C++;\n")
    (broken / "compute" / "bad.h").write_text("#pragma once\n")
    with pytest.raises(ComputeBuildError, match="compute library failed"):
        build_compute(_workload(broken, ComputeLibrary(sources=("compute/bad.cu",), header="compute/bad.h")),
                      toolchain)


SHIFT = """#include "scale.h"
__global__ void shift_kernel(float* y, float b, int64_t n) { if (threadIdx.x < n) y[threadIdx.x] += b; }
extern "C" int kit_shift(float* y, float b, int64_t n, cudaStream_t s) {
  shift_kernel<<<1, 256, 0, s>>>(y, b, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
"""


def _two_sources(tmp_path: Path, second: str) -> Workload:
    folder = tmp_path / "wl"
    (folder / "compute").mkdir(parents=True)
    for name in ("scale.cu", "scale.h"):
        (folder / "compute" / name).write_text((FIXTURES / "compute" / name).read_text())
    (folder / "compute" / "shift.cu").write_text(second)
    return _workload(folder, ComputeLibrary(sources=("compute/scale.cu", "compute/shift.cu"),
                                            header="compute/scale.h"))


def test_a_library_of_several_sources_compiles_them_at_once_and_links_one_library(toolchain, tmp_path, monkeypatch):
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    built = build_compute(_two_sources(tmp_path, SHIFT), toolchain)
    exported = subprocess.run(["nm", "-D", "--defined-only", str(built.library)], capture_output=True, text=True,
                              check=True).stdout.split()
    assert "kit_scale" in exported and "kit_shift" in exported
    assert not list(built.library.parent.glob(".objects-*"))   # the objects are gone


def test_a_failed_source_of_several_is_the_build_s_error_and_leaves_nothing(toolchain, tmp_path, monkeypatch):
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    workload = _two_sources(tmp_path, "this is not C++;\n")
    killed = _out_dir(workload, toolchain) / ".objects-killed"   # what a build killed mid-compile leaves
    killed.mkdir(parents=True)
    (killed / "0_scale.o").write_bytes(b"half an object")
    with pytest.raises(ComputeBuildError, match="compute library failed") as err:
        build_compute(workload, toolchain)
    assert "shift.cu" in str(err.value)
    assert not list((tmp_path / "cache").rglob("*.so")) and not list((tmp_path / "cache").rglob(".objects-*"))


def test_compute_key_follows_the_workload_files_and_the_shared_kernels(toolchain, tmp_path, monkeypatch):
    """A change to the workload's sources or to a shared kernel under cuco/kit/compute/ is a new library."""
    from cuco.kit import compute

    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setattr(compute, "SHARED_COMPUTE_DIR", shared)
    folder = tmp_path / "wl"
    shutil.copytree(FIXTURES / "compute", folder / "compute")
    wl = _workload(folder, ComputeLibrary(sources=("compute/scale.cu",), header="compute/scale.h"))
    base = compute.compute_key(wl, toolchain)
    (shared / "kernel.cuh").write_text("// a shared kernel\n")
    with_shared = compute.compute_key(wl, toolchain)
    (shared / "kernel.cuh").write_text("// the shared kernel, changed\n")
    changed_shared = compute.compute_key(wl, toolchain)
    (folder / "compute" / "scale.cu").write_text((folder / "compute" / "scale.cu").read_text() + "\n// edit\n")
    changed_source = compute.compute_key(wl, toolchain)
    assert len({base, with_shared, changed_shared, changed_source}) == 4
