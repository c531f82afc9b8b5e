"""GEMM+AllGather: tensor-parallel column-parallel linear with a sequence-sharded input."""

from __future__ import annotations

from pathlib import Path

from cuco.workload import Shape, ShapeError, Workload
from cuco.kit.compute import ComputeLibrary
from cuco.workloads.gemm_allgather import compute
from cuco.workloads.gemm_allgather.compute import persistent_gemm_reason
from cuco.workloads.gemm_allgather.render import WORKLOAD_RULES, render, space

DESCRIPTION = """\
GEMM+AllGather (tensor-parallel column-parallel linear, sequence-sharded input), world W.
Rank r holds A_r (M/W x K, bf16, row-major, buffer 0 'A_local', symmetric) and its weight shard B_r (K x N, bf16,
row-major, buffer 1 'B'), and computes C_r = AllGather(A) . B_r (M x N, bf16, fp32 accumulate, buffer 2 'C'):
row block p of the gathered A (rows p*M/W .. (p+1)*M/W) is A_p from rank p. Buffer 3 'A_full' (M x K, symmetric
scratch) may hold the gathered A. Communication per rank: (W-1)*M/W*K*2 bytes received; compute 2*M*N*K flops.
The host baseline is ncclAllGather followed by one cuBLASLt GEMM; the bound is max(GEMM alone, AllGather alone).
What wins: move the remote rows with few SMs (an LSA pull on a handful of CTAs reaches ~317 GB/s on H200) or none
(copy engines pushing into the peers: 300-367 GB/s into each GPU at W = 4, where pulling reached ~130) while a GEMM
on the other SMs multiplies the local rows, then multiply remote rows as they land.
Compute library (#include "cuco/compute/gemm_allgather.h", linked): cuco_ag_gemm_persistent(args, stream) is one
persistent CUTLASS GEMM over all M rows that takes the local rows first and, in its producer warp, waits for a
remote row tile's per-chunk flags (flags[p*chunks_per_rank + c] >= epoch) before loading it; give it sm_count to
leave SMs to communication CTAs. A must be one contiguous M x K matrix (e.g. A_full). Its configuration (ping-pong
128x128 or cooperative 128x256 tiles) and raster swizzle are per call: on one H200 the best of them ran within 2 %
of cuBLAS with up to 4 SMs left free and up to 12 % behind with 8; cuco_ag_gemm_tune times them at setup for
config CUCO_AG_TUNED.
"""


def check_shape(shape: Shape, world: int) -> None:
    """Raise ShapeError unless the kernels can run (M, K, N) on `world` ranks."""
    if len(shape.dims) != 3:
        raise ShapeError(f"gemm_allgather takes 3 sizes M,K,N; got {shape}")
    m, k, n = shape.dims
    if world < 1 or m % world:
        raise ShapeError(f"M={m} must be divisible by the world size {world}; pick M a multiple of {world}")
    if (m // world) % 128 or k % 64 or n % 128:
        raise ShapeError(
            f"gemm_allgather needs M/world % 128 == 0, K % 64 == 0 and N % 128 == 0 (tile sizes); got "
            f"M/world={m // world}, K={k}, N={n}: round them up to those multiples"
        )
    reason = persistent_gemm_reason(m, k, n, world)  # the compute library's persistent GEMM
    if reason:
        raise ShapeError(f"gemm_allgather: {reason}")


def flops(shape: Shape, world: int) -> float:
    """Floating-point operations of one rank's GEMM."""
    m, k, n = shape.dims
    return 2.0 * m * k * n


def comm_bytes(shape: Shape, world: int) -> float:
    """Bytes of A each rank receives from its peers."""
    m, k, _n = shape.dims
    return float((world - 1) * (m // world) * k * 2)


def tensors(shape: Shape, world: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """Row-major bf16: C = all_gather(A_local, dim 0) @ B on every rank (the plugin's buffers, in its order)."""
    M, K, N = shape.dims
    return {"A_local": ((M // world, K), "bfloat16"), "B": ((K, N), "bfloat16"), "C": ((M, N), "bfloat16"),
            "A_full": ((M, K), "bfloat16")}


WORKLOAD = Workload(
    name="gemm_allgather",
    description=DESCRIPTION,
    dim_names=("M", "K", "N"),
    verify_shapes=(Shape((512, 256, 384)), Shape((1024, 512, 256))),
    bench_shapes=(
        Shape((8192, 8192, 8192)),
        Shape((16384, 8192, 3584)),
        Shape((4096, 4096, 4096)),
        Shape((32768, 8192, 8192)),
    ),
    folder=Path(__file__).resolve().parent,
    plugin_source="plugin.cu",
    seed_source="seed_host.cu",
    space=space,
    render=render,
    check_shape=check_shape,
    flops=flops,
    comm_bytes=comm_bytes,
    libraries=("cublasLt",),
    # The persistent CUTLASS GEMM (cuco_ag_gemm_persistent in cuco/compute/gemm_allgather.h), built once.
    compute=ComputeLibrary(sources=compute.SOURCES, header=compute.HEADER, flags=compute.FLAGS,
                           libraries=("cutlass",), arch="sm_90a"),
    tensors=tensors,
)

__all__ = ["WORKLOAD", "WORKLOAD_RULES", "check_shape", "render", "space"]
