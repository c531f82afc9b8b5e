"""Built-in workloads: each subpackage exposes a module-level `WORKLOAD` (a cuco.workload.Workload)."""

from __future__ import annotations

import importlib
import pkgutil

from cuco.errors import CucoError


def available() -> list[str]:
    """Names of the built-in workloads."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)


def get(name: str):
    """The Workload called `name`; a clear error lists the ones that exist."""
    if name not in available():
        raise CucoError(f"unknown workload {name!r}; available: {', '.join(available()) or 'none'}")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.WORKLOAD
