"""The Python side of the C++/CUDA harness: build it (cached by content hash), run it, read its JSON.

    from cuco.harness import HarnessRequest, run_harness, build_shared
    plugin = build_shared(Path("workload.cu"), ["cublasLt"])
    result = run_harness(HarnessRequest(plugin, [build_shared(code)], dims=(8192, 8192, 8192), world=2))
    result.candidates[0].status, result.candidates[0].time_ms
"""

from cuco.harness.build import BuildError, build_shared, compile_shared, harness_binary, include_dir
from cuco.harness.result import (CANDIDATE_STATUSES, GRAPH_STATUSES, CandidateRun, Check, GraphRun, HarnessResult,
                                 HarnessResultError, PartRun, Timing)
from cuco.harness.runner import HarnessRequest, HarnessRequestError, gpu_count, interpret, run_harness

__all__ = [
    "BuildError", "build_shared", "compile_shared", "harness_binary", "include_dir",
    "CANDIDATE_STATUSES", "GRAPH_STATUSES", "CandidateRun", "Check", "GraphRun", "HarnessResult", "HarnessResultError",
    "PartRun", "Timing",
    "HarnessRequest", "HarnessRequestError", "gpu_count", "interpret", "run_harness",
]
