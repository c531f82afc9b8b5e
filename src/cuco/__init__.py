"""cuco: automatic compute-communication co-design of multi-GPU CUDA kernels.

Importing cuco is cheap: heavy modules (the harness, the search, litellm, cupy) load on first use.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

__version__ = "0.1.0"

# The library's messages go to the "cuco" logger; an application decides where they are shown (the `cuco`
# command shows them on stderr). Without a handler of the application's, nothing is printed.
logging.getLogger(__name__).addHandler(logging.NullHandler())

# The five first-class objects (DesignSpace, FastPathAgent, Island, Evaluator, CandidateDB), the run entry points
# and the value types, each loaded on first use.
_LAZY = {
    "DesignSpace": "cuco.design_space",
    "FastPathAgent": "cuco.fastpath.agent",
    "Island": "cuco.search.island",
    "Evaluator": "cuco.evaluate.cascade",
    "ModelledEvaluator": "cuco.evaluate.modelled",
    "CandidateEvaluator": "cuco.evaluate.base",
    "RunOptions": "cuco.run_options",
    "RunSummary": "cuco.run_summary",
    "run_workload": "cuco.run",
    "Run": "cuco.run",
    "ExportedOp": "cuco.export",
    "HostProgram": "cuco.program.source",
    "write_report": "cuco.report",
    "Directives": "cuco.design_space",
    "Topology": "cuco.design_space",
    "Candidate": "cuco.candidate",
    "LevelResult": "cuco.candidate",
    "CandidateDB": "cuco.db",
    "Workload": "cuco.workload",
    "CucoError": "cuco.errors",
}

__all__ = sorted(_LAZY) + ["__version__", "workloads"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "workloads":
        return importlib.import_module("cuco.workloads")
    raise AttributeError(f"module 'cuco' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazy names are module attributes too: dir() and tab completion list them before their first use.
    return sorted(set(globals()) | set(__all__))
