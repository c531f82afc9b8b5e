"""GEMM+AllGather's compute library: a persistent CUTLASS GEMM whose tile order and loads follow row arrival.

`ag_gemm.h` is the C interface (`cuco_ag_gemm_persistent`, `cuco_ag_gemm_check`); `ag_gemm_kernel.cuh` the
CUTLASS kernel (arrival-aware mainloop and scheduler); one `.cu` per compiled configuration. `constraints`
holds the shape rules a caller checks before anything is built or launched.
"""

# KIT-REQUEST: lay A_local out inside A_full (row block `me`, A_local = A_full + me*M/W*K; both symmetric), so
# one cuco_ag_gemm_persistent call over A_full reads the local rows in place and the remote rows as their chunk
# flags rise; the fused placement can then replace its WMMA GEMM with it without copying the local block.

from cuco.workloads.gemm_allgather.compute.constraints import (
    ALIGN_ELEMENTS,
    ROWS_PER_CLUSTER,
    TILE_M,
    persistent_gemm_reason,
)

#: Sources of the library, relative to the workload folder (for `cuco.kit.compute.ComputeLibrary`).
SOURCES = ("compute/ag_gemm.cu", "compute/ag_gemm_coop.cu", "compute/ag_gemm_pingpong.cu")
HEADER = "compute/ag_gemm.h"
#: CUTLASS's Hopper kernels need sm_90a and relaxed constexpr.
FLAGS = ("--expt-relaxed-constexpr", "-DNDEBUG")

__all__ = ["ALIGN_ELEMENTS", "FLAGS", "HEADER", "ROWS_PER_CLUSTER", "SOURCES", "TILE_M", "persistent_gemm_reason"]
