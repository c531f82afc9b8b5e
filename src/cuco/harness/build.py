"""Building the harness binary and shared objects (workload plugins, candidates), cached by content hash.

Artefacts live under ``cache_dir()/<kind>/<hash>/``; the hash covers the sources, the headers they can
include, the flags and ``Toolchain.fingerprint()``. Builds go to a temporary file that is renamed into
place, under a per-hash file lock, so parallel callers (threads or processes) compile once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, Sequence

from cuco import atomic
from cuco.errors import CucoError
from cuco.toolchain import CompileResult, Toolchain, cache_dir, content_hash, csrc_dir, default_toolchain

#: Name of the harness executable.
HARNESS_NAME = "cuco-harness"


class BuildError(CucoError):
    """nvcc failed; `log` holds its output and `command` the invocation."""

    def __init__(self, message: str, log: str = "", command: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log = log
        self.command = tuple(command)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created) held for the with-block, across threads and processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _read_all(paths: Sequence[Path]) -> list[bytes]:
    return [p.as_posix().encode() + b"\0" + p.read_bytes() for p in sorted(paths)]


def include_dir() -> Path:
    """`csrc/include`: where cuco/abi.h and cuco/gen.cuh live (added to every build)."""
    return csrc_dir() / "include"


def _header_files() -> list[Path]:
    return sorted(p for p in (include_dir() / "cuco").rglob("*") if p.is_file())


def harness_sources() -> list[Path]:
    """The harness's C++/CUDA sources (compiled) and headers (hashed)."""
    d = csrc_dir() / "harness"
    return sorted([*d.glob("*.cpp"), *d.glob("*.cu"), *d.glob("*.h"), *d.glob("*.cuh")])


def _check(result: CompileResult, what: str) -> Path:
    if not result.ok:
        tail = "\n".join(result.log.strip().splitlines()[-40:])
        raise BuildError(f"building {what} failed (nvcc: {' '.join(result.command[:1])}):\n{tail}",
                         result.log, result.command)
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
    key = content_hash(*_read_all(sources), *_read_all(_header_files()), tc.fingerprint(), "harness-v2",
                       *map(str, extra_incs))
    out_dir = cache_dir() / "harness" / key
    binary = out_dir / HARNESS_NAME
    if binary.exists():
        return binary
    with file_lock(out_dir.with_suffix(".lock")):
        if binary.exists():  # another caller built it while we waited
            return binary
        compiled = [p for p in sources if p.suffix in (".cpp", ".cu")]
        objdir = out_dir / f"obj.{os.getpid()}"

        def compile_one(src: Path) -> Path:
            obj = objdir / (src.name + ".o")
            # Compile-only: the link flags Toolchain appends are ignored by nvcc with -c.
            return _check(tc.compile([src], obj, shared=False, include_dirs=[include_dir(), *extra_incs],
                                     extra=["-c"]),
                          f"harness source {src.name}")

        workers = max(1, min(jobs or os.cpu_count() or 1, len(compiled), 8))
        with ThreadPoolExecutor(workers) as pool:
            objects = list(pool.map(compile_one, compiled))
        _check(tc.compile(objects, binary, shared=False, extra=["-ldl", "-lpthread"]),
               "the harness binary")
        for obj in objects:
            obj.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            objdir.rmdir()
    return binary


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
        local_headers = [p for p in source.parent.iterdir() if p.suffix in (".h", ".cuh", ".hpp")]
    else:
        code = source
        stem = name or "candidate"
        local_headers = []
    extra_headers = [p for d in include_dirs for p in Path(d).glob("*") if p.suffix in (".h", ".cuh", ".hpp")]
    key = content_hash(code, *_read_all(_header_files()), *_read_all(local_headers), *_read_all(extra_headers),
                       tc.fingerprint(), ",".join(libraries), " ".join(extra), " ".join(map(str, incs)))
    out_dir = cache_dir() / "shared" / key
    output = out_dir / f"lib{stem}.so"
    if output.exists():
        return CompileResult(True, output, "cached", 0.0, ())
    with file_lock(out_dir.with_suffix(".lock")):
        if output.exists():
            return CompileResult(True, output, "cached", 0.0, ())
        out_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            src = source  # compile the file itself, so nvcc's messages name it
        else:
            src = out_dir / f"{stem}.cu"
            if not src.exists():
                atomic.write_text(src, code)
        return tc.compile([src], output, shared=True, include_dirs=incs, libraries=libraries, extra=extra,
                          timeout_s=timeout_s)


def build_shared(source: Path | str, libraries: Sequence[str] = (), *, toolchain: Toolchain | None = None,
                 include_dirs: Sequence[Path] = (), extra: Sequence[str] = (), name: str | None = None) -> Path:
    """Like `compile_shared`, but returns the .so path and raises `BuildError` (with the nvcc log) on failure."""
    result = compile_shared(source, libraries, toolchain=toolchain, include_dirs=include_dirs, extra=extra, name=name)
    return _check(result, f"{source if isinstance(source, Path) else (name or 'candidate code')}")
