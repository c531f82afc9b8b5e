"""Compile and (where GPUs exist) run host programs, to check the input and verify the transformed output."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Sequence

import attrs

import functools

from cuco import builder, libraries as libs
from cuco.process import run_group, scrubbed_env
from cuco.toolchain import CompileResult, Toolchain, cache_dir, csrc_dir

_UNDEFINED = re.compile(r"undefined reference to [`'](?P<symbol>[^']+)'")
_MISSING_HEADER = re.compile(r"(?P<file>[^\s:]+):(?P<line>\d+):\d+: fatal error: (?P<header>[^:]+): No such file")
_NVCC_DIAG = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)[^:]*: (?P<msg>.*)$", re.M)


def _paths(dirs: Sequence[str | Path]) -> tuple[Path, ...]:
    return tuple(Path(d).resolve() for d in dirs)  # relative to where the user ran cuco, not where nvcc runs


@attrs.frozen
class BuildOptions:
    """What a program needs to build beyond what cuco finds from its #includes (cuBLAS, cuBLASLt, cuRAND, cuDNN,
    NVTX, NVSHMEM): more include dirs, libraries, and nvcc flags (`cuco run --include/--link/--cflags`)."""

    include_dirs: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: a library cuco knows by name (`cuco.libraries`, e.g. 'cudnn'), a library file, or a -l name ('m', '-lm')
    libraries: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    cflags: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    def known_libraries(self) -> tuple[str, ...]:
        """The libraries given by a name cuco resolves itself (headers, library dir and rpath)."""
        return tuple(n for n in self.libraries if n in libs.known())

    def nvcc_flags(self) -> list[str]:
        """The flags for everything else: -l names, library files (with their folder as rpath), the cflags."""
        flags: list[str] = []
        for lib in self.libraries:
            if lib in libs.known():
                continue
            path = Path(lib)
            if path.suffix in (".so", ".a") or ".so." in path.name:
                path = path.resolve()
                flags += [str(path), f"-Xlinker=-rpath,{path.parent}"]
            else:
                flags.append(lib if lib.startswith("-l") else f"-l{lib}")
        return flags + list(self.cflags)


@attrs.frozen
class BuildOutcome:
    """What compiling a program gave: the binary, or the log and the errors by program line."""

    ok: bool
    log: str
    binary: Path | None
    errors: tuple[tuple[int, str], ...]      # (line in the program, message)
    source: Path | None = None               # the compiled file, whose lines the filtered log may quote

    def filtered(self, code: str) -> str:
        """The log as it may be stored, shown or sent to an LLM: through cuco.compile_log.trim_log, which
        quotes `code` (the compiled text) and never another file."""
        from cuco.compile_log import trim_log  # noqa: PLC0415

        return "" if self.ok else trim_log(self.log, code, source_path=self.source)

    def summary(self, limit: int = 5) -> str:
        """One line for messages: 'compiled', the first `limit` errors, or the log's last line."""
        if self.ok:
            return "compiled"
        if self.errors:
            return "; ".join(f"line {ln}: {msg}" for ln, msg in self.errors[:limit])
        if not self.log.strip():
            return "nvcc failed"
        from cuco.compile_log import trim_log  # noqa: PLC0415

        return trim_log(self.log, "", max_errors=1).splitlines()[-1]


@attrs.frozen
class RunOutcome:
    """What running a program gave: success, its output and its checksum lines."""

    ok: bool
    output: str
    checksums: tuple[str, ...]


def nvcc_errors(log: str, source_name: str) -> tuple[tuple[int, str], ...]:
    """(line, message) of nvcc errors that point into `source_name`."""
    out = []
    for m in _NVCC_DIAG.finditer(log):
        if Path(m.group("file")).name == source_name:
            out.append((int(m.group("line")), m.group("msg").strip()))
    return tuple(out)


def missing_header_errors(log: str, code: str, source_name: str) -> tuple[tuple[int, str], ...]:
    """(line, message naming the fix) for each header the preprocessor did not find, at the program's #include
    line (or, for a header included from another header, at the first #include of that header's folder)."""
    out = []
    for m in _MISSING_HEADER.finditer(log):
        header = m.group("header").strip()
        line = int(m.group("line")) if Path(m.group("file")).name == source_name else \
            next((ln for ln, h in libs.includes(code) if h == header), 0)
        lib = libs.library_of_header(header)
        fix = (f"{lib} is linked automatically once found: {libs.spec_of(lib).install_hint}" if lib else
               "pass --include DIR (the folder that holds it; BuildOptions.include_dirs in Python), and --link LIB "
               "for its library")
        out.append((line, f"{header} not found: {fix}"))
    symbols = list(dict.fromkeys(m.group("symbol") for m in _UNDEFINED.finditer(log)))
    if symbols:
        out.append((0, f"the linker found no definition of {', '.join(symbols[:3])}: pass --link LIB for the library "
                       "that defines it (BuildOptions.libraries in Python)"))
    return tuple(out)


def build(code: str, *, workdir: Path, include_dirs: Sequence[Path] = (), shared: bool = False,
          toolchain: Toolchain | None = None, name: str = "program", cache: bool = True,
          options: BuildOptions = BuildOptions()) -> BuildOutcome:
    """Compile `code` with nvcc (NCCL headers and library of the detected toolchain, plus the libraries its
    #includes name and `options`). With `cache`, a successful build is kept under cache_dir()/fastpath, keyed by
    the code, the headers beside it, the options and the toolchain, and reused (the binary then lives there)."""
    tc = toolchain or host_toolchain()
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / f"{name}.cu"
    src.write_text(code)
    user_dirs = [*include_dirs, *options.include_dirs]
    includes = [*user_dirs, csrc_dir() / "include"]
    libraries = libs.libraries_for(code, options.known_libraries())
    try:  # a library the program includes but this machine lacks: say which, at the #include, and how to install it
        tc.link_flags(libraries)
    except libs.LibraryError as exc:
        line = next((ln for ln, h in libs.includes(code) if libs.library_of_header(h) in libraries), 0)
        return BuildOutcome(False, str(exc), None, ((line, str(exc)),))
    extra = options.nvcc_flags()

    def make(output: Path) -> CompileResult:
        return tc.compile([src], output, shared=shared, include_dirs=includes, libraries=libraries, extra=extra)

    if cache:  # a key compiles once, across threads and processes
        # the file's name is left out: one program built under two names is one artefact
        key = builder.build_key("fastpath-shared" if shared else "fastpath", tc, [("program.cu", code)],
                                flags=extra, libraries=libraries,
                                includes=[*(builder.include_identity(d) for d in user_dirs),
                                          builder.include_identity(csrc_dir() / "include", recursive=True)])
        res = builder.build(cache_dir() / "fastpath" / key, "libprogram.so" if shared else "program", make)
        if builder.is_cached(res):
            return BuildOutcome(True, "(cached)", res.output, ())
    else:
        res = make(workdir / (f"lib{name}.so" if shared else name))
    out = res.output
    errors = missing_header_errors(res.log, code, src.name) + nvcc_errors(res.log, src.name)
    return BuildOutcome(res.ok, res.log, out if res.ok else None, errors, src)


@functools.lru_cache(maxsize=1)
def host_toolchain() -> Toolchain:
    """nvcc + NCCL (host programs need no cuBLAS)."""
    return Toolchain.detect(need_cublas=False)


def gpu_count() -> int:
    """Visible NVIDIA GPUs (the harness's count)."""
    from cuco.harness.runner import gpu_count as count

    return count()


def run_program(binary: Path, timeout_s: float = 300.0) -> RunOutcome:
    """Run a standalone program; its checksum lines (lines containing 'checksum') are its result."""
    res = run_group([str(binary)], timeout_s, env=scrubbed_env(), cwd=binary.parent)
    text = res.stdout + res.stderr
    sums = tuple(line.strip() for line in res.stdout.splitlines() if "checksum" in line.lower())
    return RunOutcome(res.returncode == 0 and not res.timed_out, text, sums)


def compare_runs(original: Path, transformed: Path, timeout_s: float = 300.0) -> tuple[bool, str]:
    """Run both programs; equal checksum lines (and at least one) mean the transform is verified."""
    a = run_program(original, timeout_s)
    if not a.ok:
        return False, f"the original program failed: {a.output[-2000:]}"
    b = run_program(transformed, timeout_s)
    if not b.ok:
        return False, f"the transformed program failed: {b.output[-2000:]}"
    if not a.checksums:
        return False, "the original program prints no line containing 'checksum'; cannot compare results"
    if a.checksums != b.checksums:
        diff = "\n".join(f"  original: {x}\n  device:   {y}" for x, y in zip(a.checksums, b.checksums) if x != y)
        return False, f"results differ:\n{diff or '  (different number of checksum lines)'}"
    return True, "\n".join(b.checksums)


def scratch_dir() -> Path:
    """A new temporary folder for builds and runs."""
    return Path(tempfile.mkdtemp(prefix="cuco-fastpath-"))
