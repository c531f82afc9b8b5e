"""Design space of GEMM+AllGather and rendering of a device-initiated candidate from one of its points."""

from __future__ import annotations

from cuco.design_space import (
    DEFAULT_RULES,
    MiB,
    WHOLE,
    DesignSpace,
    Directives,
    Rule,
    Topology,
)
from cuco.kit.evolve import assemble
from cuco.kit.space import backend_subset, backends_for, lsa_one_node
from cuco.workloads.gemm_allgather import frozen
from cuco.workloads.gemm_allgather.ce_block import render_ce
from cuco.workloads.gemm_allgather.common_block import EPILOGUE, barrier_launch, prologue
from cuco.workloads.gemm_allgather.fused_block import render_fused
from cuco.workloads.gemm_allgather.gin_block import render_gin
from cuco.workloads.gemm_allgather.lsa_blocks import render_lsa
from cuco.workloads.gemm_allgather.nvshmem_block import INCLUDE as NVSHMEM_INCLUDE, render_nvshmem


#: Chunk sizes that matter at these shapes (a rank's block is 16-256 MiB at the bench shapes).
CHUNK_SIZES = (WHOLE, 16 * MiB, 4 * MiB, 1 * MiB)
BACKENDS = ("lsa", "gin", "nvshmem")


def _copy_engine_subset(d: Directives, _s: DesignSpace) -> str | None:
    if d.issuer != "copy_engine":
        return None
    if d.backend != "lsa":
        return ("issuer=copy_engine copies between NVLink-mapped buffers (LSA pointers); use backend=lsa, or "
                "issuer=thread/warp/cta with gin or nvshmem")
    if d.sync_scope not in ("world", "team"):
        return ("issuer=copy_engine is bracketed by barrier kernels on the copy stream (no CTA of ours opens a "
                "barrier session or polls a peer's flag); use sync_scope=world or team")
    if d.placement == "split_put_wait" and d.chunk_bytes:
        return ("issuer=copy_engine with placement=split_put_wait multiplies the pushed rows after one barrier, "
                "so chunks change nothing; use chunk_bytes=whole, or placement=stream_overlap for chunked pushes")
    return None


WORKLOAD_RULES: tuple[Rule, ...] = (
    backend_subset("gemm-ag-gin-subset", "gin",
                   "backend=gin is rendered as put-with-signal (placement=split_put_wait, sync_scope=signal): the "
                   "candidate ABI declares no GIN barriers, and pull or fused GIN designs are not templated; pick "
                   "those directives or backend=lsa",
                   placement=("split_put_wait",), sync_scope=("signal",)),
    backend_subset("gemm-ag-nvshmem-subset", "nvshmem",
                   "backend=nvshmem is rendered as put-with-signal by warps or CTAs (placement=split_put_wait, "
                   "sync_scope=signal, issuer=warp or cta); pick those directives or backend=lsa",
                   placement=("split_put_wait",), sync_scope=("signal",), issuer=("warp", "cta")),
    Rule("gemm-ag-copy-engine-subset", _copy_engine_subset),
    lsa_one_node("gemm-ag-lsa-one-team", "gathers from every rank by NVLink load/store"),
)
#: copy-engine-transport's fused clause does not hold here: fused is one persistent GEMM that follows chunk flags,
#: and the chunks may be moved by copy engines on the side stream (the GEMM's producer warps wait for the flags
#: those streams raise); its GIN clause is kept by gemm-ag-copy-engine-subset.
RULES = tuple(r for r in DEFAULT_RULES if r.name != "copy-engine-transport") + WORKLOAD_RULES


def space(topology: Topology) -> DesignSpace:
    """The workload's design space on `topology`. Load its JSON with extra_rules=WORKLOAD_RULES."""
    return DesignSpace(
        backends=backends_for(topology, BACKENDS),
        issuers=("thread", "warp", "cta", "copy_engine"),
        chunk_sizes=CHUNK_SIZES,
        topology=topology,
        fused_grid_ctas=topology.sm_count,
        max_coresident_ctas=topology.sm_count,
        rules=RULES,
    )


def placement_body(point: Directives) -> str:
    """The point's kernels and launch code (the EVOLVE block without the shared prologue)."""
    if point.backend == "gin":
        return render_gin(point)
    if point.backend == "nvshmem":
        return render_nvshmem(point)
    if point.issuer == "copy_engine":
        return render_ce(point, barrier_launch)
    if point.placement == "fused":
        return render_fused(point)
    return render_lsa(point)


def _block(point: Directives) -> str:
    include = NVSHMEM_INCLUDE if point.backend == "nvshmem" else ""
    return include + prologue(point) + placement_body(point) + EPILOGUE


def render(point: Directives) -> str:
    """CUDA source of the candidate for `point`: frozen setup and ABI entry points around one EVOLVE block
    (kernels, flag protocol and the launch pipeline). Pure function of the point, not checked here:
    Workload.render checks it against the run's topology first."""
    header = (
        "// GEMM+AllGather, device-initiated.\n"
        "// C[M x N] = AllGather_rows(A_r)[M x K] . B_r[K x N] on every rank r; bf16 in/out, fp32 accumulate.\n"
        "// Buffers: 0 A_local (M/W x K, symmetric), 1 B (K x N), 2 C (M x N), 3 A_full (M x K, symmetric).\n"
        "// The EVOLVE block must define block_needs(ctx) and enqueue(ctx, state) in namespace cuco_ag.\n"
    )
    # The point's label lives inside the EVOLVE block: frozen text is byte-identical across points.
    point_line = (f"// design point {point.label()}: backend={point.backend} placement={point.placement} "
                  f"sync_scope={point.sync_scope} issuer={point.issuer} chunk_bytes={point.chunk_bytes}\n")
    return assemble(header + frozen.head(), point_line + _block(point), frozen.TAIL)
