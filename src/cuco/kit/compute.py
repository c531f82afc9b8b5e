"""A workload's compute library: its library kernels (CUTLASS, cuBLASLt, ...) compiled once per configuration.

The workload declares `ComputeLibrary(sources=..., header=...)`; `build_compute` compiles the sources into
`lib<workload>_compute.so`, cached by the content of every file in the sources' folders, the toolchain and the
flags, and publishes the C interface header as `cuco/compute/<workload>.h`. Plugin, seed and candidates include
that header and link the library (`link_options`), so a candidate compiles in seconds whatever the library
kernels cost to build.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, Sequence

import attrs

from cuco import atomic
from cuco.builder import build, build_key, failure_text, include_identity, is_cached
from cuco.errors import CucoError
from cuco.toolchain import CompileResult, Toolchain, cache_dir, csrc_dir

#: Messages of builds that take minutes (the "cuco" logger's child; a run also writes them to events.log).
BUILD_LOG = logging.getLogger("cuco.build")

_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".h", ".cuh", ".hpp", ".inl")
# Library kernels shared by several workloads' compute libraries (e.g. CUTLASS's Hopper FMHA), included as
# "cuco/kit/compute/<file>"; part of every compute library's cache key.
SHARED_COMPUTE_DIR = csrc_dir() / "include" / "cuco" / "kit" / "compute"


class ComputeBuildError(CucoError):
    """The compute library did not compile; `log` holds nvcc's output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


@attrs.frozen
class ComputeLibrary:
    """What a workload compiles once: sources and the C interface header (paths relative to the workload
    folder), extra nvcc flags, the libraries the kernels need, and an arch override (e.g. 'sm_90a' for
    CUTLASS's Hopper kernels; None: the toolchain's)."""

    sources: tuple[str, ...] = attrs.field(converter=tuple)
    header: str
    flags: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    libraries: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    arch: str | None = None

    @sources.validator
    def _some(self, _attr: attrs.Attribute, value: tuple[str, ...]) -> None:
        if not value:
            raise ValueError("a compute library needs at least one source file")


@attrs.frozen
class BuiltCompute:
    """A compiled compute library: the .so, the include dir holding cuco/compute/<workload>.h, how to link it."""

    library: Path
    include_dir: Path
    seconds: float
    cached: bool

    def link_flags(self) -> list[str]:
        """nvcc flags that link this library, with an rpath to where it lies."""
        d = self.library.parent
        return [f"-L{d}", f"-l:{self.library.name}", f"-Xlinker=-rpath,{d}"]


@attrs.frozen
class LinkOptions:
    """Everything a plugin, seed or candidate of one workload is compiled with beyond the cuco headers."""

    libraries: tuple[str, ...] = ()
    include_dirs: tuple[Path, ...] = ()
    extra: tuple[str, ...] = ()


class CompiledWorkload(Protocol):
    """What the build reads of a workload (cuco.workload.Workload has it): named here rather than imported,
    since the workload module imports ComputeLibrary from this one."""

    name: str
    folder: Path
    compute: ComputeLibrary | None
    libraries: Sequence[str]


def _inputs(folder: Path, spec: ComputeLibrary) -> list[Path]:
    """Every file the build can read: all sources and headers in the sources' folders, and the library-kernel
    instantiations that several workloads share (csrc/include/cuco/kit/compute/)."""
    dirs = {(folder / s).parent for s in spec.sources} | {(folder / spec.header).parent} | {SHARED_COMPUTE_DIR}
    files = {p for d in dirs for p in d.rglob("*") if p.is_file() and p.suffix in _SOURCE_SUFFIXES}
    return sorted(files)


def _key_name(path: Path, folder: Path) -> str:
    """A file's name in the key: relative to the workload, or to the shared folder."""
    base = folder if path.is_relative_to(folder) else SHARED_COMPUTE_DIR
    return path.relative_to(base).as_posix()


def compute_key(workload: CompiledWorkload, toolchain: Toolchain) -> str:
    """The cache key of a workload's compute library on this toolchain."""
    spec = workload.compute
    assert spec is not None
    tc = attrs.evolve(toolchain, arch=spec.arch) if spec.arch else toolchain
    files = _inputs(workload.folder, spec)
    return build_key(f"compute:{workload.name}", tc, [(_key_name(p, workload.folder), p.read_bytes()) for p in files],
                     flags=spec.flags, libraries=spec.libraries,
                     includes=[include_identity(csrc_dir() / "include", recursive=True)])


def _out_dir(workload: CompiledWorkload, toolchain: Toolchain) -> Path:
    return cache_dir() / "compute" / compute_key(workload, toolchain)


def publish_header(workload: CompiledWorkload, toolchain: Toolchain) -> Path:
    """The include dir holding cuco/compute/<workload>.h, without building the library: enough for a compile
    check of a shared object (the fast path's), which may leave the library's symbols undefined."""
    spec = workload.compute
    if spec is None or not (workload.folder / spec.header).is_file():
        raise ComputeBuildError(f"workload {workload.name} declares no compute header; set ComputeLibrary(header=...)")
    include = _out_dir(workload, toolchain) / "include"
    published = include / "cuco" / "compute" / f"{workload.name}.h"
    if not published.exists():
        published.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(published, (workload.folder / spec.header).read_bytes())
    return include


def build_compute(workload: CompiledWorkload, toolchain: Toolchain, timeout_s: float = 1800) -> BuiltCompute:
    """Compile (or find cached) `workload`'s compute library; ComputeBuildError with nvcc's log on failure."""
    spec = workload.compute
    if spec is None:
        raise ComputeBuildError(f"workload {workload.name} declares no compute library")
    missing = [s for s in (*spec.sources, spec.header) if not (workload.folder / s).is_file()]
    if missing:
        raise ComputeBuildError(f"workload {workload.name}'s compute library names missing file(s) {missing} "
                                f"under {workload.folder}; fix ComputeLibrary(sources=..., header=...)")
    start = time.monotonic()
    out_dir = _out_dir(workload, toolchain)
    library = out_dir / f"lib{workload.name}_compute.so"
    include = publish_header(workload, toolchain)
    tc = attrs.evolve(toolchain, arch=spec.arch) if spec.arch else toolchain
    incs = [csrc_dir() / "include", workload.folder, *{(workload.folder / s).parent for s in spec.sources}]

    def make(output: Path) -> CompileResult:
        # said before and after, so a run's console and RUN_DIR/events.log show where the minutes went
        BUILD_LOG.info(f"cuco: building {workload.name}'s compute library {library.name} (once per toolchain; "
                       f"minutes with an empty cache) ...")
        sources = [workload.folder / s for s in spec.sources]
        if len(sources) == 1:
            return tc.compile(sources, output, shared=True, include_dirs=incs, libraries=spec.libraries,
                              extra=spec.flags, timeout_s=timeout_s)
        return _compile_sources_at_once(tc, sources, output, incs, spec, timeout_s)

    result = build(out_dir, library.name, make)
    if not is_cached(result):
        BUILD_LOG.info(f"cuco: {workload.name}'s compute library {'built' if result.ok else 'failed'} in "
                       f"{result.seconds:.0f} s")
    if not result.ok:
        raise ComputeBuildError(f"building {workload.name}'s compute library failed:\n{failure_text(result)}",
                                result.log)
    return BuiltCompute(library, include, time.monotonic() - start, is_cached(result))


def _compile_sources_at_once(tc: Toolchain, sources: Sequence[Path], output: Path, include_dirs: Sequence[Path],
                             spec: ComputeLibrary, timeout_s: float) -> CompileResult:
    """A library of several sources: each compiled to an object at the same time (nvcc takes the sources of one
    command one after another), then linked. The first failed compile is the result; the objects are removed, and
    so are those a build killed before it could remove them left in the folder."""
    start = time.monotonic()
    for stale in output.parent.glob(".objects-*"):   # under the folder's build lock: left by a killed build
        shutil.rmtree(stale, ignore_errors=True)
    objects = Path(tempfile.mkdtemp(prefix=".objects-", dir=output.parent))
    try:
        targets = [objects / f"{i}_{src.stem}.o" for i, src in enumerate(sources)]

        def one(src: Path, obj: Path) -> CompileResult:
            return tc.compile([src], obj, shared=False, include_dirs=include_dirs, libraries=spec.libraries,
                              extra=[*spec.flags, "-c"], timeout_s=timeout_s)

        with ThreadPoolExecutor(max_workers=max(1, min(len(sources), os.cpu_count() or 1))) as pool:
            compiled = list(pool.map(one, sources, targets))
        failed = next((r for r in compiled if not r.ok), None)
        if failed is not None:
            return failed
        linked = tc.compile(targets, output, shared=True, libraries=spec.libraries, extra=spec.flags,
                            timeout_s=timeout_s)
        log = "".join(r.log for r in (*compiled, linked))
        return attrs.evolve(linked, log=log, seconds=time.monotonic() - start)
    finally:
        shutil.rmtree(objects, ignore_errors=True)


def link_options(workload: CompiledWorkload, toolchain: Toolchain) -> LinkOptions:
    """How to compile `workload`'s plugin, seed and candidates: its libraries, and its compute library (built
    here once if it declares one)."""
    if workload.compute is None:
        return LinkOptions(tuple(workload.libraries))
    built = build_compute(workload, toolchain)
    libraries = tuple(dict.fromkeys((*workload.libraries, *workload.compute.libraries)))
    return LinkOptions(libraries, (built.include_dir,), tuple(built.link_flags()))
