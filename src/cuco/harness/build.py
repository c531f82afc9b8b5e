"""Building the harness binary and shared objects (workload plugins, candidates), cached by content hash.

Artefacts live under ``cache_dir()/<kind>/<key>/``, built through `cuco.builder` (one key recipe, a lock per
key, an atomic publish), so parallel callers (threads or processes) compile once.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from cuco import atomic
from cuco.builder import build, build_key, failure_text, file_lock, include_identity
from cuco.errors import CucoError
from cuco.toolchain import CompileResult, Toolchain, cache_dir, csrc_dir, default_toolchain

#: Name of the harness executable.
HARNESS_NAME = "cuco-harness"


class BuildError(CucoError):
    """nvcc failed; `log` holds its output and `command` the invocation."""

    def __init__(self, message: str, log: str = "", command: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log = log
        self.command = tuple(command)


__all__ = ["HARNESS_NAME", "BuildError", "build_shared", "compile_shared", "file_lock", "harness_binary",
           "harness_sources", "include_dir", "nvshmem_host_library"]


def include_dir() -> Path:
    """`csrc/include`: where cuco/abi.h and cuco/gen.cuh live (added to every build)."""
    return csrc_dir() / "include"


def _sources(paths: Sequence[Path]) -> list[tuple[str, bytes]]:
    return [(p.as_posix(), p.read_bytes()) for p in sorted(paths)]


def _library_include(path: Path) -> str:
    # an installed library's headers are named by their folder (the toolchain's fingerprint names its version)
    return f"library:{path}"


def harness_sources() -> list[Path]:
    """The harness's C++/CUDA sources (compiled) and headers (hashed)."""
    d = csrc_dir() / "harness"
    return sorted([*d.glob("*.cpp"), *d.glob("*.cu"), *d.glob("*.h"), *d.glob("*.cuh")])


def _check(result: CompileResult, what: str, source: Path | None = None, code: str = "") -> Path:
    if not result.ok:
        raise BuildError(f"building {what} failed (nvcc: {' '.join(result.command[:1])}):\n"
                         f"{failure_text(result, source, code)}", result.log, result.command)
    return result.output


def _optional_includes(tc: Toolchain) -> list[Path]:
    """Headers of optional backends the harness serves when present (NVSHMEM); their absence only switches the
    backend off (the harness then says so for a candidate that needs it)."""
    from cuco.errors import CucoError  # noqa: PLC0415

    try:
        lib = tc.library("nvshmem")
    except CucoError:
        return []
    return [lib.include]


def nvshmem_host_library(tc: Toolchain | None = None) -> Path | None:
    """libnvshmem_host.so.3 of the NVSHMEM install cuco links candidates against, or None."""
    from cuco.errors import CucoError  # noqa: PLC0415

    try:
        lib = (tc or default_toolchain()).library("nvshmem")
    except CucoError:
        return None
    return lib.libdir / lib.link_name if lib.libdir is not None else None


def harness_binary(toolchain: Toolchain | None = None, *, jobs: int | None = None) -> Path:
    """The `cuco-harness` executable for this toolchain, built once and cached."""
    tc = toolchain or default_toolchain()
    sources = harness_sources()
    if not any(p.suffix in (".cpp", ".cu") for p in sources):
        raise BuildError(f"no harness sources in {csrc_dir() / 'harness'}; reinstall cuco")
    extra_incs = _optional_includes(tc)
    link = ["-ldl", "-lpthread"]
    key = build_key("harness", tc, _sources(sources), flags=link,
                    includes=[include_identity(include_dir(), recursive=True), *map(_library_include, extra_incs)])
    out_dir = cache_dir() / "harness" / key

    def make(binary: Path) -> CompileResult:
        compiled = [p for p in sources if p.suffix in (".cpp", ".cu")]
        objdir = out_dir / f"obj.{os.getpid()}"

        def compile_one(src: Path) -> Path:
            obj = objdir / (src.name + ".o")
            # Compile-only: the link flags Toolchain appends are ignored by nvcc with -c.
            return _check(tc.compile([src], obj, shared=False, include_dirs=[include_dir(), *extra_incs],
                                     extra=["-c"]),
                          f"harness source {src.name}", src, src.read_text(errors="replace"))

        workers = max(1, min(jobs or os.cpu_count() or 1, len(compiled), 8))
        with ThreadPoolExecutor(workers) as pool:
            objects = list(pool.map(compile_one, compiled))
        result = tc.compile(objects, binary, shared=False, extra=link)
        for obj in objects:
            obj.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            objdir.rmdir()
        return result

    return _check(build(out_dir, HARNESS_NAME, make), "the harness binary")


def compile_shared(source: Path | str, libraries: Sequence[str] = (), *, toolchain: Toolchain | None = None,
                   include_dirs: Sequence[Path] = (), extra: Sequence[str] = (), name: str | None = None,
                   timeout_s: float = 600) -> CompileResult:
    """Compile a plugin or candidate (a file, or CUDA code as a string) into a cached shared object.

    Never raises for a compile error: the result's `ok` and `log` say what happened. `csrc/include` is always
    on the include path; for a file, so is its folder (and the folder's headers are part of the hash).
    """
    tc = toolchain or default_toolchain()
    incs = [include_dir(), *map(Path, include_dirs)]
    if isinstance(source, Path):
        if not source.is_file():
            raise BuildError(f"source file {source} does not exist")
        code = source.read_text()
        incs.append(source.parent.resolve())
        stem = name or source.stem
    else:
        code = source
        stem = name or "candidate"
    key = build_key("shared", tc, [(stem, code)], flags=extra, libraries=libraries,
                    includes=[include_identity(include_dir(), recursive=True),
                              *(include_identity(d) for d in incs[1:])])
    out_dir = cache_dir() / "shared" / key

    def make(output: Path) -> CompileResult:
        if isinstance(source, Path):
            src = source  # compile the file itself, so nvcc's messages name it
        else:
            src = out_dir / f"{stem}.cu"
            if not src.exists():
                atomic.write_text(src, code)
        return tc.compile([src], output, shared=True, include_dirs=incs, libraries=libraries, extra=extra,
                          timeout_s=timeout_s)

    return build(out_dir, f"lib{stem}.so", make)


def build_shared(source: Path | str, libraries: Sequence[str] = (), *, toolchain: Toolchain | None = None,
                 include_dirs: Sequence[Path] = (), extra: Sequence[str] = (), name: str | None = None) -> Path:
    """Like `compile_shared`, but returns the .so path and raises `BuildError` (with the nvcc log) on failure."""
    result = compile_shared(source, libraries, toolchain=toolchain, include_dirs=include_dirs, extra=extra, name=name)
    if isinstance(source, Path):
        return _check(result, str(source), source, source.read_text())
    # a text is compiled from <stem>.cu beside its artefact (compile_shared)
    return _check(result, name or "candidate code", result.output.parent / f"{name or 'candidate'}.cu", source)
