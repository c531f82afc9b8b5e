"""Libraries a workload may declare (cuBLASLt, CUTLASS headers, cuDNN, ...): how each is found on disk.

A workload names what it needs in `Workload.libraries`; the toolchain resolves every name through the
`LibrarySpec` registered here. A workload that needs a library cuco does not know registers its own spec with
`register()` when it is imported: nothing in the core names a workload.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import attrs

from cuco.errors import CucoError


class LibraryError(CucoError):
    """A declared library is unknown or missing; the message says how to install it."""


@attrs.frozen
class Library:
    """A library found on disk: include dirs, lib dir, the file to link ('' for header-only), its origin."""

    name: str
    include: Path
    libdir: Path | None
    link_name: str          # passed as -l:<link_name>; '' for a header-only library
    version: str
    origin: str             # 'wheel', 'env', 'system', 'toolkit', 'package'
    more_includes: tuple[Path, ...] = ()
    extra: tuple[str, ...] = ()  # more flags after the link name (e.g. NVSHMEM's -rdc=true -lnvshmem_device)
    system_include: bool = False  # searched after every -I dir and the toolkit's (-isystem)

    def flags(self) -> list[str]:
        """The nvcc flags that compile and link against this library: include dirs, library dir, rpath, name."""
        inc = "-isystem=" if self.system_include else "-I"
        flags = [f"{inc}{self.include}", *(f"{inc}{d}" for d in self.more_includes)]
        if self.link_name and self.libdir is not None:
            flags += [f"-L{self.libdir}", f"-l:{self.link_name}", f"-Xlinker=-rpath,{self.libdir}", *self.extra]
        return flags


@attrs.frozen
class LibrarySpec:
    """Where to look for one library, first hit wins: $<env_var>/{include,lib}, the pip wheels' nvidia/<dir>,
    a Python package's data (found with importlib.util.find_spec, never imported), the CUDA toolkit."""

    name: str
    header: str                                   # a file that must exist in the include dir
    lib_stem: str = ""                            # e.g. 'libcublasLt.so'; '' for header-only
    env_var: str = ""                             # e.g. 'CUBLAS_HOME'
    wheel_dirs: tuple[str, ...] = ()              # sub-folders of <site-packages>/nvidia
    package: str = ""                             # a Python package that ships the headers
    package_includes: tuple[str, ...] = ()        # include dirs inside that package (first one holds `header`)
    in_toolkit: bool = False
    install_hint: str = ""
    # The include dir also ships copies of toolkit headers (the cu13 wheel's CCCL and nv/): searched last, so they
    # never shadow nvcc's own (CUTLASS in the same translation unit fails to compile against them otherwise).
    system_include: bool = False
    extra: tuple[str, ...] = ()                   # flags after the link name (see Library.extra)


def site_dirs() -> list[Path]:
    """sys.path entries that hold NVIDIA pip wheels (a `nvidia/` folder)."""
    dirs = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    return [d for d in dirs if (d / "nvidia").is_dir()]


def first_lib(libdir: Path, stem: str) -> str | None:
    """The best file to link for `stem` (e.g. 'libnccl.so') in libdir: unversioned, else the shortest name."""
    if (libdir / stem).exists():
        return stem
    versions = sorted(libdir.glob(stem + ".*"), key=lambda p: len(p.name))
    return versions[0].name if versions else None


def _package_root(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # locates without importing (no import side effects)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find(spec: LibrarySpec, cuda_home: Path | None) -> Library:
    """Resolve `spec` on this machine; LibraryError names the install that fixes a miss."""
    candidates: list[tuple[Path, Path | None, str, tuple[Path, ...]]] = []
    if spec.env_var and os.environ.get(spec.env_var):
        home = Path(os.environ[spec.env_var])
        candidates.append((home / "include", home / "lib", "env", ()))
    for site in site_dirs():
        for sub in spec.wheel_dirs:
            candidates.append((site / "nvidia" / sub / "include", site / "nvidia" / sub / "lib", "wheel", ()))
    if spec.package:
        root = _package_root(spec.package)
        if root is not None and spec.package_includes:
            incs = tuple(root / p for p in spec.package_includes)
            candidates.append((incs[0], None, "package", tuple(d for d in incs[1:] if d.is_dir())))
    if spec.in_toolkit and cuda_home is not None:
        for lib in ("lib64", "targets/x86_64-linux/lib", "lib"):
            candidates.append((cuda_home / "include", cuda_home / lib, "toolkit", ()))
            candidates.append((cuda_home / "targets/x86_64-linux/include", cuda_home / lib, "toolkit", ()))
    for include, libdir, origin, more in candidates:
        if not (include / spec.header).exists():
            continue
        if not spec.lib_stem:
            return Library(spec.name, include, None, "", "", origin, more, system_include=spec.system_include)
        link = first_lib(libdir, spec.lib_stem) if libdir is not None else None
        if link:
            return Library(spec.name, include, libdir, link, "", origin, more, spec.extra, spec.system_include)
    raise LibraryError(f"{spec.name} not found ({spec.header}{' and ' + spec.lib_stem if spec.lib_stem else ''}): "
                       f"{spec.install_hint or 'install it'}")


_REGISTRY: dict[str, LibrarySpec] = {}


def register(spec: LibrarySpec) -> LibrarySpec:
    """Make `spec.name` resolvable; re-registering the same spec is a no-op, a different one is an error."""
    old = _REGISTRY.get(spec.name)
    if old is not None and old != spec:
        raise LibraryError(f"library {spec.name!r} is already registered differently; pick another name")
    _REGISTRY[spec.name] = spec
    return spec


def known() -> tuple[str, ...]:
    """The names of every registered library."""
    return tuple(_REGISTRY)


def spec_of(name: str) -> LibrarySpec:
    """The registered LibrarySpec of `name`; LibraryError naming the known ones and how to register another."""
    if name not in _REGISTRY:
        raise LibraryError(f"unknown library {name!r}; known: {', '.join(sorted(_REGISTRY))} (a workload may "
                           "register its own with cuco.libraries.register(LibrarySpec(...)))")
    return _REGISTRY[name]


CUBLASLT = register(LibrarySpec(
    "cublasLt", "cublasLt.h", "libcublasLt.so", env_var="CUBLAS_HOME", wheel_dirs=("cu13", "cu12", "cublas"),
    in_toolkit=True, install_hint="pip install nvidia-cublas (CUDA 13) or nvidia-cublas-cu12, or set CUBLAS_HOME / "
    "CUDA_HOME to a toolkit with cublasLt.h and libcublasLt.so", system_include=True))
CUTLASS = register(LibrarySpec(
    "cutlass", "cutlass/cutlass.h", env_var="CUTLASS_HOME", package="cutlass_library",
    package_includes=("source/include", "source/tools/util/include"),
    install_hint="pip install nvidia-cutlass (the cu12/cu13 extras include it), or set CUTLASS_HOME to a CUTLASS "
    "checkout whose include/ holds cutlass/cutlass.h"))
CUDNN = register(LibrarySpec(
    "cudnn", "cudnn.h", "libcudnn.so", env_var="CUDNN_HOME", wheel_dirs=("cudnn", "cu13", "cu12"),
    in_toolkit=True, install_hint="pip install nvidia-cudnn-cu13 (or -cu12), or set CUDNN_HOME"))
NVSHMEM = register(LibrarySpec(
    "nvshmem", "nvshmemx.h", "libnvshmem_host.so", env_var="NVSHMEM_HOME", wheel_dirs=("nvshmem",),
    extra=("-rdc=true", "-lnvshmem_device"),
    install_hint="pip install nvidia-nvshmem-cu13 (the cu13 extra brings it through nvshmem4py-cu13), or set "
    "NVSHMEM_HOME to an install with include/nvshmemx.h and lib/libnvshmem_host.so"))

CUBLAS = register(LibrarySpec(
    "cublas", "cublas_v2.h", "libcublas.so", env_var="CUBLAS_HOME", wheel_dirs=("cu13", "cu12", "cublas"),
    in_toolkit=True, install_hint="pip install nvidia-cublas (CUDA 13) or nvidia-cublas-cu12, or set CUBLAS_HOME / "
    "CUDA_HOME to a toolkit with cublas_v2.h and libcublas.so", system_include=True))
CURAND = register(LibrarySpec(
    "curand", "curand.h", "libcurand.so", env_var="CURAND_HOME", wheel_dirs=("cu13", "cu12", "curand"),
    in_toolkit=True, install_hint="pip install nvidia-curand (CUDA 13) or nvidia-curand-cu12, or set CURAND_HOME / "
    "CUDA_HOME to a toolkit with curand.h and libcurand.so", system_include=True))
NVTX = register(LibrarySpec(
    "nvtx", "nvtx3/nvToolsExt.h", env_var="NVTX_HOME", wheel_dirs=("cu13", "cu12", "nvtx"), in_toolkit=True,
    install_hint="pip install nvidia-nvtx (CUDA 13) or nvidia-nvtx-cu12 (NVTX 3 is header-only), or set NVTX_HOME",
    system_include=True))

#: Headers whose inclusion makes a program use a library: its headers found and, unless header-only, linked.
#: libcublas needs libcublasLt, so both come with the cuBLAS headers. NVSHMEM's also compile -rdc=true.
INCLUDED_LIBRARIES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("cublas_v2.h", "cublas.h", "cublas_api.h", "cublasXt.h"), ("cublas", "cublasLt")),
    "cublasLt.h": ("cublasLt",),
    **dict.fromkeys(("curand.h", "curand_kernel.h"), ("curand",)),
    "cudnn.h": ("cudnn",),
    **dict.fromkeys(("nvtx3/nvToolsExt.h", "nvtx3/nvToolsExtCuda.h", "nvtx3/nvtx3.hpp"), ("nvtx",)),
    **dict.fromkeys(("nvshmem.h", "nvshmemx.h", "cuco/kit/nvshmem.cuh"), ("nvshmem",)),
}
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def includes(code: str) -> list[tuple[int, str]]:
    """(line, header) of every #include in `code`, in order."""
    return [(code.count("\n", 0, m.start()) + 1, m.group(1)) for m in _INCLUDE.finditer(code)]


def library_of_header(header: str) -> str | None:
    """The registered library that ships `header` (the first one INCLUDED_LIBRARIES names), else None."""
    names = INCLUDED_LIBRARIES.get(header)
    return names[0] if names else None


def libraries_for(code: str, libraries: "tuple[str, ...] | list[str]") -> tuple[str, ...]:
    """`libraries` plus those the code pulls in by including their headers (INCLUDED_LIBRARIES), in order."""
    out = list(libraries)
    for _line, header in includes(code):
        out += INCLUDED_LIBRARIES.get(header, ())
    return tuple(dict.fromkeys(out))
