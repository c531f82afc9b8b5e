"""Compile and (where GPUs exist) run host programs, to check the input and verify the transformed output."""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path
from typing import Sequence

import attrs

from cuco.harness.build import file_lock
from cuco.process import run_group, scrubbed_env
import functools

from cuco.toolchain import Toolchain, cache_dir, content_hash, csrc_dir, default_toolchain

_USES_CUBLASLT = re.compile(r'^\s*#\s*include\s*[<"]cublasLt\.h[>"]', re.M)
_NVCC_DIAG = re.compile(r"^(?P<file>[^\s(]+)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)[^:]*: (?P<msg>.*)$", re.M)


@attrs.frozen
class BuildOutcome:
    """What compiling a program gave: the binary, or the log and the errors by program line."""

    ok: bool
    log: str
    binary: Path | None
    errors: tuple[tuple[int, str], ...]      # (line in the program, message)
    source: Path | None = None               # the compiled file, whose lines the filtered log may quote

    def filtered(self, code: str) -> str:
        """The log as it may be stored, shown or sent to an LLM: through cuco.evaluate.compile.trim_log, which
        quotes `code` (the compiled text) and never another file."""
        from cuco.evaluate.compile import trim_log  # noqa: PLC0415 (the evaluator's filter; it imports no fast path)

        return "" if self.ok else trim_log(self.log, code, source_path=self.source)

    def summary(self, limit: int = 5) -> str:
        """One line for messages: 'compiled', the first `limit` errors, or the log's last line."""
        if self.ok:
            return "compiled"
        if self.errors:
            return "; ".join(f"line {ln}: {msg}" for ln, msg in self.errors[:limit])
        if not self.log.strip():
            return "nvcc failed"
        from cuco.evaluate.compile import trim_log  # noqa: PLC0415

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


def build(code: str, *, workdir: Path, include_dirs: Sequence[Path] = (), shared: bool = False,
          toolchain: Toolchain | None = None, name: str = "program", cache: bool = True) -> BuildOutcome:
    """Compile `code` with nvcc (NCCL headers and library of the detected toolchain). With `cache`, a
    successful build is kept under cache_dir()/fastpath, keyed by the code, the headers beside it and the
    toolchain, and reused (the returned binary then lives there)."""
    tc = toolchain or host_toolchain()
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / f"{name}.cu"
    src.write_text(code)
    includes = [*include_dirs, csrc_dir() / "include"]
    # programs in candidate-ABI form often call cuBLASLt; link it only when the source includes it
    libraries = ("cublasLt",) if _USES_CUBLASLT.search(code) else ()
    if libraries and toolchain is None:
        tc = default_toolchain()
    binary = f"lib{name}.so" if shared else name
    out = workdir / binary
    if cache:
        headers = [h.read_bytes() for d in include_dirs for h in sorted(Path(d).glob("*.h*")) if h.is_file()]
        headers += [h.read_bytes() for h in sorted((csrc_dir() / "include").rglob("*.h*")) if h.is_file()]
        key = content_hash(code, repr(tc), str(shared), *libraries, *headers)
        out = cache_dir() / "fastpath" / key / ("libprogram.so" if shared else "program")
    # a cached key compiles once, across threads and processes; the lock is taken only when there is work to do
    lock = file_lock(out.parent.with_suffix(".lock")) if cache and not out.exists() else contextlib.nullcontext()
    with lock:
        if cache and out.exists():
            return BuildOutcome(True, "(cached)", out, ())
        res = tc.compile([src], out, shared=shared, include_dirs=includes, libraries=libraries)
    return BuildOutcome(res.ok, res.log, out if res.ok else None, nvcc_errors(res.log, src.name), src)


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
