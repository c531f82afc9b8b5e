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
from cuco.errors import CucoError
from cuco.toolchain import MIN_NCCL, CompileResult, Toolchain, ToolchainError, cache_dir as default_cache_dir, \
    csrc_dir, pid_alive

#: Name the candidate's source gets on disk, so compiler messages read "candidate.cu(12): error ...".
SOURCE_NAME = "candidate.cu"
#: An undefined symbol must fail here, not later when the harness loads the object.
DEFAULT_FLAGS = ("-Xlinker=--no-undefined",)
MAX_ERRORS = 5
MAX_EXCERPT_CHARS = 3000

_HEADER = re.compile(r"^(?P<file>[^\s(:][^(:\n]*?)(?:\((?P<line>\d+)\)|:(?P<gline>\d+)(?::\d+)?):\s*"
                     r"(?P<kind>(?:catastrophic |fatal )?error|warning|remark|note)\b", re.IGNORECASE)
_OTHER_ERROR = re.compile(r"^(ptxas|nvlink|nvcc|/usr/bin/ld|ld|collect2)\b.*\b(error|fatal)\b"
                          r"|undefined reference to|^ptxas fatal", re.IGNORECASE)
_NOISE = re.compile(r"detected during|instantiation of|^\s*Remark: The warnings can be suppressed|"
                    r"^\s*In file included from|^\s*from\s|Compilation terminated|^\d+ errors? detected",
                    re.IGNORECASE)
#: Failures of the machine rather than of the candidate's code (disk full, out of memory, read-only disk).
_MACHINE_FAULT = re.compile(r"No space left on device|Disk quota exceeded|Cannot allocate memory|"
                            r"Read-only file system|out of memory", re.IGNORECASE)
_ABS_PATH = re.compile(r"(?:/[\w.+\-]+)+/([\w.+\-]+)")


#: Bound of the compiled-candidate cache in MB ($CUCO_CACHE_MAX_MB); the least recently used entries go first.
DEFAULT_CACHE_MAX_MB = 4096


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
_QUOTED = re.compile(r"`[^'\n]*'|\"[^\"\n]*\"|'[^'\n]*'|\u2018[^\u2019\n]*\u2019")


def _elide_quotes(text: str) -> str:
    """`text` with every quoted fragment replaced: messages about another file quote that file's tokens."""
    return _QUOTED.sub('"…"', text)


def _is_candidate(path: str, source_path: Path | None, source_name: str) -> bool:
    if source_path is not None:
        return os.path.normpath(path.strip()) == os.path.normpath(str(source_path))
    return Path(path.strip()).name == source_name


def _shorten(line: str) -> str:
    return _ABS_PATH.sub(lambda m: m.group(1), line)


def trim_log(log: str, source: str, max_errors: int = MAX_ERRORS, max_chars: int = MAX_EXCERPT_CHARS,
             source_path: Path | None = None) -> str:
    """The first `max_errors` errors of an nvcc log, each with its source line; warnings and template
    instantiation notes dropped; absolute paths shortened to the file name.

    The log is stored and sent to an LLM, and the compiler echoes lines of whatever file it read (a header, or
    a file reached by an assembler's `.include`). So only the candidate's own lines are quoted: an error in
    another file keeps its name, line and message with every quoted fragment elided, and never that file's
    text. The candidate is the file at `source_path` (by default any file named like it)."""
    source_name = source_path.name if source_path is not None else SOURCE_NAME
    src_lines = source.splitlines()
    lines = log.splitlines()
    errors: list[list[str]] = []
    total = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _HEADER.match(line.strip())
        if header:
            # nvcc prints the offending source line and a caret under a header: take them with it.
            context = []
            j = i + 1
            while j < len(lines) and lines[j].startswith((" ", "\t")) and not _HEADER.match(lines[j].strip()):
                if lines[j].strip() and not _NOISE.search(lines[j]):
                    context.append(lines[j].rstrip())
                j += 1
            i = j
            if "error" not in header.group("kind").lower():
                continue
            total += 1
            if len(errors) >= max_errors:
                continue
            shown: list[str] = []
            if len(context) >= 2 and context[-1].strip() == "^":
                shown = context[-2:]       # nvcc's copy of the source line and the caret under it
                context = context[:-2]
            lineno = int(header.group("line") or header.group("gline"))
            if not _is_candidate(header.group("file"), source_path, source_name):
                errors.append([_elide_quotes(_shorten(line.strip())) + "  (in a file that is not the candidate; "
                               "its text is not shown)"])
                continue
            if 1 <= lineno <= len(src_lines):
                # The candidate's own line, as written (nvcc shows it after macro rewriting).
                shown = ["    " + src_lines[lineno - 1].strip()]
            errors.append([_shorten(line.strip()), *(_shorten(c) for c in context[:3]), *shown])
            continue
        if _OTHER_ERROR.search(line) and not _NOISE.search(line):
            total += 1
            if len(errors) < max_errors:
                errors.append([_shorten(line.strip())])  # the linker and ptxas name symbols, never file text
        i += 1
    if not errors:
        # Not a format we know: keep the tail, which is where compilers put the verdict; it may quote any file.
        kept = [_elide_quotes(_shorten(l)) for l in lines if l.strip() and not _NOISE.search(l)
                and not l.startswith((" ", "\t"))]
        text = "\n".join(kept[-12:]) or "nvcc failed without output"
        return text[-max_chars:]
    text = "\n".join("\n".join(e) for e in errors)
    if total > len(errors):
        text += f"\n... and {total - len(errors)} more errors"
    if len(text) > max_chars:
        text = text[:max_chars - 20] + "\n... (truncated)"
    return text


class Compiler:
    """Compiles candidates (and workload plugins) to shared objects for one toolchain, with a disk cache.

    `arch` overrides the toolchain's detected arch (e.g. 'sm_90a'); `jobs` bounds parallel nvcc runs.
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
        self.jobs = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
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
        machine = [_elide_quotes(line.strip()) for line in result.log.splitlines()
               if _MACHINE_FAULT.search(line) and not line.startswith((" ", "\t"))]
        if machine:  # the machine failed, not the candidate: say so first, and never cache it
            excerpt = "\n".join(dict.fromkeys(_shorten(m) for m in machine[:3])) + "\n" + excerpt
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
