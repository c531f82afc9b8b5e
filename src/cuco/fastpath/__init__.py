"""Fast path: host-driven CUDA+NCCL program -> correct device-initiated program (rules first, LLM loop for
the rest), with EVOLVE-BLOCK markers for the search."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "FastPathAgent": "cuco.fastpath.agent",
    "FastPathResult": "cuco.fastpath.agent",
    "FastPathError": "cuco.fastpath.model",
    "Analysis": "cuco.fastpath.model",
    "analyze": "cuco.fastpath.analyze",
    "analyze_file": "cuco.fastpath.analyze",
    "transform": "cuco.fastpath.transform",
    "render_report": "cuco.fastpath.render",
    "prompt_text": "cuco.fastpath.render",
    "transform_main": "cuco.fastpath.cli",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cuco.fastpath' has no attribute {name!r}")
