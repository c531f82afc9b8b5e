"""Shape rules of the persistent GEMM (`cuco_ag_gemm_persistent`), mirrored from `cuco_ag_gemm_check` in
ag_gemm.cu so that a bad shape is rejected, with its reason, before anything is compiled or launched."""

from __future__ import annotations

#: Rows of one CTA tile (every compiled configuration).
TILE_M = 128
#: Rows of one cluster (2 CTAs along M): the local-first rotation moves whole clusters' worth of tiles only when
#: M is a multiple of it.
ROWS_PER_CLUSTER = 256
#: TMA moves 16-byte rows: leading dimensions (K for A, N for B and C) in bf16 elements.
ALIGN_ELEMENTS = 8


def persistent_gemm_reason(m: int, k: int, n: int, world: int) -> str | None:
    """None when C[M x N] = A[M x K] . B[K x N] with M/world local rows per rank can run on the persistent GEMM;
    else what is violated and how to fix it."""
    if world < 1:
        return f"world={world}: need at least one rank"
    if min(m, k, n) < 1 or max(m, k, n) > 2**31 - 1:
        return f"M, K, N must be in 1..2^31-1; got M={m}, K={k}, N={n}"
    if m % ROWS_PER_CLUSTER:
        return (f"the persistent GEMM needs M % {ROWS_PER_CLUSTER} == 0 (tile M {TILE_M} x cluster 2, so the "
                f"local-first rotation maps whole tiles); got M={m}: pad M to {-(-m // ROWS_PER_CLUSTER) * ROWS_PER_CLUSTER}")
    if m % world or (m // world) % TILE_M:
        return (f"the persistent GEMM needs M/world % {TILE_M} == 0 (a rank's rows start on a tile); got "
                f"M={m}, world={world}: pick M a multiple of {TILE_M * world}")
    if k % ALIGN_ELEMENTS or n % ALIGN_ELEMENTS:
        return (f"the persistent GEMM loads rows with TMA, which needs 16-byte rows: K % {ALIGN_ELEMENTS} == 0 and "
                f"N % {ALIGN_ELEMENTS} == 0; got K={k}, N={n}: pad them")
    return None
