"""Evaluation of candidates: the CandidateEvaluator protocol and the measured cascade (static -> compile -> verify ->
bench) with its parts. Names load on first use, so `import cuco.evaluate` stays cheap."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CandidateEvaluator": "cuco.evaluate.base",
    "check_static": "cuco.evaluate.static",
    "Violation": "cuco.evaluate.static",
    "Compiler": "cuco.evaluate.compile",
    "CompileOutcome": "cuco.evaluate.compile",
    "Executor": "cuco.evaluate.executor",
    "DeviceGroup": "cuco.evaluate.executor",
    "NoGPUError": "cuco.evaluate.executor",
    "Cascade": "cuco.evaluate.levels",
    "Batch": "cuco.evaluate.batch",
    "DuplicateIdError": "cuco.evaluate.batch",
    "HarnessRunner": "cuco.evaluate.harness_runner",
    "LocalHarness": "cuco.evaluate.harness_runner",
    "Evaluator": "cuco.evaluate.cascade",
    "CascadeError": "cuco.evaluate.cascade",
    "NO_GPU_REASON": "cuco.evaluate.levels",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cuco.evaluate' has no attribute {name!r}")
