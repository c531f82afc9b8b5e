"""Level 1: compile a candidate to a shared object with nvcc, cached by content hash, in parallel.

The cache key covers the source, the flags, the toolchain fingerprint (nvcc, NCCL install, arch) and the
cuco headers, so a hit is always safe to reuse. Failures are cached too: an identical broken program
(a frequent LLM answer) costs nothing the second time. Compiler logs are trimmed to what a person or an
LLM needs to fix the code: the first few errors with file:line and the offending source line.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import time
from pathlib import Path
from typing import Callable, Sequence

import attrs

from cuco import atomic
from cuco.builder import build, build_key, include_identity, is_cached
from cuco.compile_log import SOURCE_NAME, elide_quotes, shorten_paths, trim_log
from cuco.errors import CucoError
from cuco.toolchain import MIN_NCCL, CompileResult, Toolchain, ToolchainError, cache_dir as default_cache_dir, \
    csrc_dir, pid_alive

#: An undefined symbol must fail here, not later when the harness loads the object.
DEFAULT_FLAGS = ("-Xlinker=--no-undefined",)
#: Failures of the machine rather than of the candidate's code (disk full, out of memory, read-only disk).
_MACHINE_FAULT = re.compile(r"No space left on device|Disk quota exceeded|Cannot allocate memory|"
                            r"Read-only file system|out of memory", re.IGNORECASE)


#: Bound of the compiled-candidate cache in MB ($CUCO_CACHE_MAX_MB); the least recently used entries go first.
DEFAULT_CACHE_MAX_MB = 4096
#: Parallel nvcc runs at most by default, and the memory each may take: a candidate with NCCL's device API and
#: CUTLASS headers peaks near 2 GiB in cicc.
MAX_DEFAULT_JOBS = 32
GIB_PER_JOB = 2


def default_jobs(cpus: int | None = None, available_gib: float | None = None) -> int:
    """Parallel nvcc runs for this machine: $CUCO_COMPILE_JOBS, else one per usable CPU, at most one per
    GIB_PER_JOB GiB of available memory and MAX_DEFAULT_JOBS (a 64-core GPU machine compiles a search's points
    four times as fast as at the former fixed 8; a 2-core CI machine keeps 2)."""
    given = os.environ.get("CUCO_COMPILE_JOBS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"CUCO_COMPILE_JOBS={given!r}: set it to a whole number of parallel nvcc runs >= 1, "
                             "or unset it")
        return int(given)
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if available_gib is None:
        available_gib = _available_gib()
    by_memory = int(available_gib // GIB_PER_JOB) if available_gib is not None else cpus
    return max(1, min(cpus, by_memory, MAX_DEFAULT_JOBS))


def _available_gib() -> float | None:
    """MemAvailable of /proc/meminfo in GiB, or None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return None
    return None


def sweep_cache(cache: Path, max_bytes: int) -> None:
    """Remove temp files left by compiles whose process is gone, then the least recently used entries
    until the cache holds at most `max_bytes`."""
    used = {entry: entry.stat().st_mtime for entry in cache.iterdir() if entry.is_dir()}  # before any unlink
    busy = set()
    for tmp in cache.glob("*/.*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2] if tmp.name.count(".") >= 3 else ""
        if not pid.isdigit() or not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
        else:
            busy.add(tmp.parent)  # a compile is writing it now
    entries = []
    for entry, mtime in used.items():
        if entry not in busy:
            files = [f for f in entry.iterdir() if f.is_file()]
            entries.append((mtime, entry, sum(f.stat().st_size for f in files)))
    total = sum(size for _, _, size in entries)
    for _, entry, size in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        shutil.rmtree(entry, ignore_errors=True)
        total -= size


@attrs.frozen
class CompileOutcome:
    """The result of compiling one candidate."""

    ok: bool
    so_path: Path | None       # the shared object when ok
    log_excerpt: str           # trimmed errors when not ok; empty when ok
    seconds: float             # wall time of this call (a cache hit is near zero)
    cached: bool
    key: str = ""              # content hash: the cache entry's name


def _version_tuple(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return ()


def _detect(arch: str | None) -> Toolchain:
    """nvcc and NCCL are required; a workload's libraries are resolved when it links them."""
    return Toolchain.detect(arch)


# Quoted fragments of a compiler or assembler message: "x", 'x', `x', and the typographic quotes gcc uses.
class Compiler:
    """Compiles candidates (and workload plugins) to shared objects for one toolchain, with a disk cache.

    `arch` overrides the toolchain's detected arch (e.g. 'sm_90a'); `jobs` bounds parallel nvcc runs (default:
    `default_jobs()`).
    """

    def __init__(self, toolchain: Toolchain | None = None, cache_dir: Path | None = None, jobs: int | None = None,
                 arch: str | None = None, extra_flags: Sequence[str] = (), timeout_s: float = 600.0):
        toolchain = toolchain if toolchain is not None else _detect(arch)
        if arch is not None and arch != toolchain.arch:
            toolchain = attrs.evolve(toolchain, arch=arch)
        found = _version_tuple(toolchain.nccl.version)
        if found and found < MIN_NCCL:
            raise ToolchainError(
                f"NCCL {toolchain.nccl.version} at {toolchain.nccl.include} is too old: cuco needs NCCL >= "
                f"{'.'.join(map(str, MIN_NCCL))} for the device API; pip install 'nvidia-nccl-cu13>=2.28.9' "
                "(or cu12), or set NCCL_HOME")
        self.toolchain = toolchain
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "candidates"
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        max_mb = float(os.environ.get("CUCO_CACHE_MAX_MB", DEFAULT_CACHE_MAX_MB))
        sweep_cache(self.cache_dir, int(max_mb * 1024 * 1024))
        self.jobs = jobs if jobs is not None else default_jobs()
        if self.jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {self.jobs}")
        self.extra_flags = DEFAULT_FLAGS + tuple(extra_flags)
        self.timeout_s = timeout_s
        self.include_dir = csrc_dir() / "include"
        # Header contents are part of the key: an ABI change must not reuse old objects. Read once: every
        # candidate of this compiler includes them.
        self._include_id = include_identity(self.include_dir, recursive=True)

    def key(self, code: str, libraries: Sequence[str] = (), include_dirs: Sequence[Path] = (),
            extra: Sequence[str] = ()) -> str:
        """The cache key of one compilation (`cuco.builder.build_key`'s recipe)."""
        return build_key("candidate", self.toolchain, [(SOURCE_NAME, code)], flags=[*self.extra_flags, *extra],
                         libraries=sorted(libraries),
                         includes=[self._include_id, *(include_identity(d) for d in include_dirs)])

    def compile(self, candidate_code: str, libraries: Sequence[str] = (),
                include_dirs: Sequence[Path] = (), extra: Sequence[str] = ()) -> CompileOutcome:
        """Compile one program to a shared object (or return the cached one). Never raises on a compile
        error: the trimmed log is in the outcome. `extra` flags (e.g. a compute library to link) are keyed."""
        start = time.monotonic()
        from cuco.libraries import libraries_for  # noqa: PLC0415

        libraries = libraries_for(candidate_code, tuple(libraries))  # an NVSHMEM program brings NVSHMEM
        for name in libraries:
            try:
                self.toolchain.library(name)
            except CucoError as exc:  # a library this program needs is not installed: its compile fails, said why
                return CompileOutcome(False, None, str(exc), time.monotonic() - start, False, "")
        key = self.key(candidate_code, libraries, include_dirs, extra)
        entry = self.cache_dir / key
        so_path, fail_path = entry / "candidate.so", entry / "error.txt"
        if so_path.exists():
            os.utime(entry)  # recently used: the cache sweep keeps it
            return CompileOutcome(True, so_path, "", time.monotonic() - start, True, key)
        if fail_path.exists():
            return CompileOutcome(False, None, fail_path.read_text(), time.monotonic() - start, True, key)

        def make(output: Path) -> CompileResult:
            source = entry / SOURCE_NAME
            atomic.write_text(source, candidate_code)
            return self.toolchain.compile([source], output, shared=True,
                                          include_dirs=[self.include_dir, *include_dirs], libraries=libraries,
                                          extra=(*self.extra_flags, *extra), timeout_s=self.timeout_s)

        result = build(entry, so_path.name, make)  # a lock per key: parallel compilers of one program compile once
        if result.ok:
            return CompileOutcome(True, so_path, "", time.monotonic() - start, is_cached(result), key)
        excerpt = trim_log(result.log, candidate_code)
        machine = [elide_quotes(line.strip()) for line in result.log.splitlines()
               if _MACHINE_FAULT.search(line) and not line.startswith((" ", "\t"))]
        if machine:  # the machine failed, not the candidate: say so first, and never cache it
            excerpt = "\n".join(dict.fromkeys(shorten_paths(m) for m in machine[:3])) + "\n" + excerpt
            return CompileOutcome(False, None, excerpt, time.monotonic() - start, False, key)
        atomic.write_text(entry / "full_log.txt", result.log)
        if "timed out" not in result.log:  # a timeout may pass on a less loaded machine: do not cache it
            atomic.write_text(fail_path, excerpt)
        return CompileOutcome(False, None, excerpt, time.monotonic() - start, False, key)

    def compile_many(self, codes: Sequence[str], libraries: Sequence[str] = (),
                     include_dirs: Sequence[Path] = (), extra: Sequence[str] = (),
                     on_done: Callable[[int, CompileOutcome], None] | None = None) -> list[CompileOutcome]:
        """Compile several programs in parallel (at most `jobs` nvcc at once); results in input order.
        Identical programs are compiled once. `on_done(index, outcome)` is called, in this thread, as each
        program finishes (for progress: a compile takes seconds)."""
        unique = list(dict.fromkeys(codes))
        outcomes: dict[str, CompileOutcome] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(self.jobs, max(1, len(unique)))) as pool:
            futures = {pool.submit(self.compile, c, libraries, include_dirs, extra): c for c in unique}
            for fut in concurrent.futures.as_completed(futures):
                code = futures[fut]
                outcomes[code] = fut.result()
                if on_done is not None:
                    for i, c in enumerate(codes):
                        if c == code:
                            on_done(i, outcomes[code])
        return [outcomes[c] for c in codes]
