"""What a run's target names: a built-in workload, a workload folder outside the package (the kit's layout, its
`__init__.py` defines WORKLOAD), or a user's host program (.cu). `cuco run TARGET` and `cuco space TARGET` resolve
it here; a target that names none of them is refused with what would be accepted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from cuco.errors import CucoError
from cuco.problem import Problem

__all__ = ["PROGRAM_SUFFIXES", "load_workload_folder", "resolve"]

#: The file suffixes taken for a host program's source.
PROGRAM_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")


def resolve(target: str, build: Any = None, launcher: str = "auto") -> Problem:
    """The problem `target` names: a built-in workload, a workload folder, or a host program (.cu), which is built
    with `build` (a cuco.fastpath.verify.BuildOptions; None: none) and gets its ranks as `launcher` says."""
    from cuco import workloads

    is_program = Path(target).suffix in PROGRAM_SUFFIXES
    if launcher != "auto" and not is_program:
        raise CucoError(f"--launcher {launcher} applies to a host program (.cu); {target} is a workload: drop it")

    if target in workloads.available():
        return workloads.get(target)
    path = Path(target)
    if path.is_dir():
        return load_workload_folder(path)
    if path.suffix in PROGRAM_SUFFIXES or path.is_file():
        from cuco.program.workload import ProgramWorkload

        return ProgramWorkload.load(path, *([build] if build is not None else []), launcher=launcher)
    raise CucoError(f"unknown workload {target!r}; available: {', '.join(workloads.available())}; or pass a workload "
                    "folder or a host CUDA+NCCL program (.cu)")


def load_workload_folder(folder: Path) -> Problem:
    """WORKLOAD from a folder laid out like cuco/workloads/<name>/ (docs/workloads.md)."""
    init = folder / "__init__.py"
    if not init.is_file():
        raise CucoError(f"{folder}: a workload folder has an __init__.py defining WORKLOAD (docs/workloads.md)")
    name = f"cuco_user_workload_{folder.resolve().name}"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: say where it failed, whatever it raised
        sys.modules.pop(name, None)
        raise CucoError(f"{folder}: importing the workload failed: {type(exc).__name__}: {exc}") from None
    workload = getattr(module, "WORKLOAD", None)
    if workload is None:
        raise CucoError(f"{init}: defines no WORKLOAD; set WORKLOAD = cuco.workload.Workload(...)")
    return workload
