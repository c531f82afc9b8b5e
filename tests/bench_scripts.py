"""A benchmark script (benchmarks/NAME.py) imported by a test, with its folder on sys.path while it imports (its
sibling imports resolve as when it runs)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def bench_module(name: str) -> ModuleType:
    """benchmarks/`name`.py as a module."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
