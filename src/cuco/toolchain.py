"""Toolchain discovery: nvcc, one consistent NCCL install, the GPU arch, the libraries workloads declare; and nvcc
invocations."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Sequence

import attrs

from cuco import libraries as libs
from cuco import atomic
from cuco.libraries import Library, LibraryError

#: The NCCL device API (LSA, ncclDevComm) first shipped in 2.28.
MIN_NCCL = (2, 28, 0)
#: Where a system NCCL is looked for last: (include dir, lib dir).
SYSTEM_NCCL = (Path("/usr/include"), Path("/usr/lib/x86_64-linux-gnu"))
#: nvcc locations tried after CUCO_NVCC, CUDA_HOME and PATH.
NVCC_FALLBACKS = ("/usr/local/cuda/bin/nvcc",)
_NCCL_PIP = "pip install 'nvidia-nccl-cu13>=2.28.9' (CUDA 13) or 'nvidia-nccl-cu12>=2.28.9' (CUDA 12)"


class ToolchainError(LibraryError):
    """A compiler or library is missing or too old; the message says how to install it."""


__all__ = ["Library", "Toolchain", "ToolchainError", "find_library"]


@attrs.frozen
class CompileResult:
    """One nvcc invocation: whether it succeeded, the output file, the log, the seconds taken and the command."""

    ok: bool
    output: Path
    log: str
    seconds: float
    command: tuple[str, ...]


def _site_dirs() -> list[Path]:
    return libs.site_dirs()


_first_lib = libs.first_lib


def _nccl_version(include: Path) -> str:
    text = (include / "nccl.h").read_text(errors="replace")
    parts = [re.search(rf"#define NCCL_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        return "unknown"
    return ".".join(m.group(1) for m in parts)  # type: ignore[union-attr]


def find_nccl() -> Library:
    """NCCL_HOME, else the pip wheel (nvidia-nccl-cu12/13), else the system install; headers and library
    always from the same install."""
    candidates: list[tuple[Path, Path, str]] = []
    if os.environ.get("NCCL_HOME"):
        home = Path(os.environ["NCCL_HOME"])
        if not (home / "include" / "nccl.h").exists() or _first_lib(home / "lib", "libnccl.so") is None:
            raise ToolchainError(
                f"NCCL_HOME={home} has no include/nccl.h and lib/libnccl.so*; point NCCL_HOME at an NCCL >= "
                f"{'.'.join(map(str, MIN_NCCL))} install, or unset it to use the pip wheel ({_NCCL_PIP})")
        candidates.append((home / "include", home / "lib", "env"))
    for site in _site_dirs():
        candidates.append((site / "nvidia" / "nccl" / "include", site / "nvidia" / "nccl" / "lib", "wheel"))
    candidates.append((*SYSTEM_NCCL, "system"))
    for include, libdir, origin in candidates:
        if not (include / "nccl.h").exists():
            continue
        link = _first_lib(libdir, "libnccl.so")
        if link is None:
            continue
        version = _nccl_version(include)
        if not (include / "nccl_device.h").exists():
            raise ToolchainError(
                f"NCCL {version} at {include} is too old: it has no device API (nccl_device.h) and cuco needs "
                f"NCCL >= {'.'.join(map(str, MIN_NCCL))}; {_NCCL_PIP}, or set NCCL_HOME to a newer install")
        return Library("nccl", include, libdir, link, version, origin)
    raise ToolchainError(
        f"NCCL not found (cuco needs NCCL >= {'.'.join(map(str, MIN_NCCL))}): {_NCCL_PIP}, "
        "or set NCCL_HOME to an install with include/nccl.h and lib/libnccl.so"
    )


def find_library(name: str, cuda_home: Path | None) -> Library:
    """A declared library (see cuco.libraries) on this machine; ToolchainError names the install on a miss."""
    try:
        return libs.find(libs.spec_of(name), cuda_home)
    except LibraryError as exc:
        raise ToolchainError(str(exc)) from None


def find_cublaslt(cuda_home: Path | None) -> Library:
    """cuBLASLt headers and library: CUBLAS_HOME, the pip wheel, or the CUDA toolkit."""
    return find_library("cublasLt", cuda_home)


def find_nvcc() -> Path:
    """CUCO_NVCC (which must exist when set), else CUDA_HOME/bin/nvcc, PATH, then NVCC_FALLBACKS."""
    if os.environ.get("CUCO_NVCC"):
        given = Path(os.environ["CUCO_NVCC"])
        if not given.is_file():
            raise ToolchainError(f"CUCO_NVCC={given} does not exist; point it at an nvcc binary or unset it")
        return given
    for cand in (os.environ.get("CUDA_HOME") and str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"),
                 shutil.which("nvcc"), *NVCC_FALLBACKS):
        if cand and Path(cand).exists():
            return Path(cand)
    raise ToolchainError(
        "nvcc not found: install the CUDA toolkit (12.4 or newer; e.g. apt-get install cuda-nvcc-13-0 from "
        "NVIDIA's CUDA repository) and put nvcc on PATH, or set CUDA_HOME or CUCO_NVCC"
    )


def toolkit_home(nvcc: Path) -> Path:
    """The CUDA toolkit `nvcc` belongs to: its bin/'s parent when that holds the toolkit's headers, else CUDA_HOME
    or /usr/local/cuda (an nvcc on PATH may be a copy or wrapper outside the toolkit, e.g. /usr/local/bin/nvcc)."""
    own = nvcc.resolve().parent.parent
    for cand in (own, os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if cand and any((Path(cand) / d / "cuda_runtime.h").exists()
                        for d in ("include", "targets/x86_64-linux/include")):
            return Path(cand)
    return own


def detect_arch() -> str:
    """CUCO_ARCH, else the first GPU's compute capability, else sm_90 (H100/H200)."""
    if os.environ.get("CUCO_ARCH"):
        return os.environ["CUCO_ARCH"]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.split()
            if out:
                major, minor = out[0].split(".")
                arch = f"sm_{major}{minor}"
                return "sm_90a" if arch == "sm_90" and os.environ.get("CUCO_ARCH_SUFFIX") == "a" else arch
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return "sm_90"


@attrs.frozen
class Toolchain:
    """One consistent set of compiler and libraries, detected once per process."""

    nvcc: Path
    cuda_version: str
    cuda_home: Path
    nccl: Library
    arch: str

    @classmethod
    def detect(cls, arch: str | None = None, need: Sequence[str] = (), need_cublas: bool = False) -> "Toolchain":
        """nvcc, NCCL and the arch; the libraries in `need` (need_cublas: cuBLASLt) are resolved now, so a missing
        one fails here rather than at the first compile."""
        need = (*need, "cublasLt") if need_cublas else tuple(need)
        nvcc = find_nvcc()
        try:
            text = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolchainError(f"nvcc at {nvcc} does not run ({exc}); reinstall the CUDA toolkit") from None
        m = re.search(r"release (\d+\.\d+)", text)
        cuda_home = toolkit_home(nvcc)
        tc = cls(nvcc, m.group(1) if m else "unknown", cuda_home, find_nccl(), arch or detect_arch())
        for name in need:
            tc.library(name)
        return tc

    def library(self, name: str) -> Library:
        """A library a workload declared (e.g. 'cublasLt', 'cutlass'), found for this toolkit."""
        return find_library(name, self.cuda_home)

    @property
    def cublaslt(self) -> Library | None:
        """cuBLASLt if present (for `cuco doctor`); None when missing."""
        try:
            return self.library("cublasLt")
        except ToolchainError:
            return None

    def fingerprint(self) -> str:
        """Identifies what a compiled artefact depends on, for content-hash caches."""
        return f"nvcc{self.cuda_version}/nccl{self.nccl.version}@{self.nccl.include}/{self.arch}"

    def base_flags(self) -> list[str]:
        """The nvcc flags of every compile: C++17, -O3, this toolchain's arch, position-independent code."""
        return ["-std=c++17", "-O3", f"-arch={self.arch}", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
                "-diag-suppress", "177,550"]

    def link_flags(self, libraries: Sequence[str] = ()) -> list[str]:
        """Include and link flags for NCCL and each named library; raises ToolchainError for a missing library."""
        flags = self.nccl.flags()
        for name in dict.fromkeys(libraries):
            flags += self.library(name).flags()
        return flags

    def compile(self, sources: Sequence[Path], output: Path, *, shared: bool = True,
                include_dirs: Sequence[Path] = (), libraries: Sequence[str] = (),
                extra: Sequence[str] = (), timeout_s: float = 600) -> CompileResult:
        """Run nvcc; never raises on compile errors (they are in the result's log)."""
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = atomic.temp_path(output)
        cmd = [str(self.nvcc), *self.base_flags(), *(["-shared"] if shared else []),
               *(f"-I{d}" for d in include_dirs), *map(str, sources), "-o", str(tmp),
               *self.link_flags(libraries), *extra]
        from cuco.process import run_group, scrubbed_env  # nvcc compiles untrusted code: allow-listed env, reaped

        start = time.monotonic()
        # nvcc's own temp files (tmpxft_*) go to a folder of this compile, removed on every exit path (by the
        # launcher when this process is killed): a stopped compile leaves none in the shared temp dir
        _sweep_dead_scratch()
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        ok = False
        try:
            done = run_group(cmd, timeout_s, env=scrubbed_env(extra={"TMPDIR": str(scratch)}), scratch=scratch)
            ok = done.returncode == 0 and not done.timed_out
            log = f"nvcc timed out after {timeout_s:.0f}s" if done.timed_out else done.stdout + done.stderr
            if ok:
                atomic.publish(tmp, output)  # a cached artefact is never half-written
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            if not ok:
                tmp.unlink(missing_ok=True)
        return CompileResult(ok, output, log, time.monotonic() - start, tuple(cmd))


def pid_alive(pid: int) -> bool:
    """True while a process `pid` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: Prefix of the folder each compile gives nvcc for its temp files, followed by the compiling process's pid.
SCRATCH_PREFIX = "cuco-nvcc-"


@functools.lru_cache(maxsize=1)
def _sweep_dead_scratch() -> None:
    """Once per process: remove the nvcc scratch folders of processes that are gone (a launcher killed by
    SIGKILL, the one exit that cannot clean up)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = folder.name[len(SCRATCH_PREFIX):].split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=4)
def default_toolchain(arch: str | None = None) -> Toolchain:
    """This machine's toolchain for `arch` (None: detected), detected once per process."""
    return Toolchain.detect(arch)


def content_hash(*parts: str | bytes) -> str:
    """A short hash (24 hex digits) of the parts, each one delimited so that a split between parts counts."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:24]


def csrc_dir() -> Path:
    """The harness sources: cuco/_csrc in an installed wheel, else <repo>/csrc."""
    here = Path(__file__).resolve().parent
    for cand in (here / "_csrc", here.parent.parent / "csrc"):
        if (cand / "include" / "cuco" / "abi.h").exists():
            return cand
    raise ToolchainError("cuco's csrc/ (the harness sources) is missing from this install; reinstall cuco")


def cache_dir() -> Path:
    """Where compiled artefacts are cached: $CUCO_CACHE_DIR or ~/.cache/cuco."""
    d = Path(os.environ.get("CUCO_CACHE_DIR", Path.home() / ".cache" / "cuco"))
    d.mkdir(parents=True, exist_ok=True)
    return d
