"""Design space of the ring-attention workload and rendering of a device-initiated candidate from one of its
points.

Every point with attend=ring runs the same W ring steps (attention of the local queries to one source's KV block, merged with the
log-sum-exp); the directives choose how the KV blocks reach the ring slots and when the attention may start:

- deferred: move every block first, then the W steps.
- stream_overlap: the side stream moves the blocks in ring-step order (few CTAs pull them; the copy engines push
  this rank's block into every reader) while the main stream attends to its own block; each later step waits for
  its block's landed (or arrival) flag.
- split_put_wait: the put half pushes this rank's block into every reader's ring slot (side stream); the wait
  half (a barrier, or per-source arrival signals) holds each later step until its block landed.
- fused: the chunk-pipelined form. Every block, the own one included, moves slice by slice (chunk_bytes); the
  attention of a slice starts as soon as its landed flag is up (an in-stream wait) and is merged with the LSE.
  The FMHA kernel itself does not poll flags: "fused" here is per-chunk pipelining, not an in-kernel consumer.
- sync_scope: world / team = LSA barrier kernels around the transfers; signal = per-source ready / done /
  arrival epoch flags (per ring step), landed flags per slice.
- issuer: thread / warp / cta groups of an SM pull or push kernel; copy_engine = DMA copies between LSA-mapped
  buffers, bracketed by barrier kernels (pushes with arrival flags where they overlap the attention: copy engines
  wrote 2.3-2.8x faster than they read at W = 4).
- chunk_bytes: slice size of the fused pipeline (K+V rows, multiples of 128 rows).
- backend=gin (compiled; runs only with an RDMA NIC): split_put_wait with put-with-signal per ring step.
- attend (extra): ring = the W steps above; hybrid / gathered = fewer, larger calls over the other ranks' K/V
  pulled into one region (deferred or stream_overlap, SM pulls; gather_block.py); gathered with placement=fused
  launches its calls at once, their FMHA waiting for each KV tile's source inside the kernel.
"""

from __future__ import annotations

from cuco.design_space import DEFAULT_RULES, MiB, WHOLE, DesignSpace, Directives, Rule, Topology
from cuco.extra_directives import ExtraDirective
from cuco.kit.evolve import assemble
from cuco.kit.space import backend_subset, backends_for, lsa_one_node
from cuco.workloads.attention_cp import frozen
from cuco.workloads.attention_cp.gather_block import render_gather
from cuco.workloads.attention_cp.gin_block import render_gin
from cuco.workloads.attention_cp.lsa_block import render_lsa

#: Slices of the fused pipeline. Each slice costs one FMHA launch and one merge over every query row (into an fp32
#: running output, 10 bytes per element): slices below 1 MiB multiply both.
CHUNK_SIZES = (WHOLE, 4 * MiB, 1 * MiB)


def _chunks_only_fused(d: Directives, _s: DesignSpace) -> str | None:
    if d.get("attend") != "ring":
        if d.chunk_bytes != WHOLE:
            return (f"attend={d.get('attend')} waits per source (a whole block), so chunks change nothing; use "
                    "chunk_bytes=whole")
        return None
    if d.placement == "fused" and d.chunk_bytes == WHOLE:
        return "placement=fused pipelines slices of each block: pick a chunk size"
    if d.placement != "fused" and d.chunk_bytes != WHOLE:
        return (f"placement={d.placement} waits for whole blocks, so chunks change nothing; use chunk_bytes=whole, "
                "or placement=fused for a slice pipeline")
    return None


#: The compute form (cuco_attn::gather_* in the compute library's header). ring: one call per source block, merged
#: (every point above). hybrid: the own block in place, then at most two merged calls over the other ranks' rows
#: packed into one region. gathered: every token at its global position, one bottom-right causal call per zigzag
#: chunk, nothing to merge. On one GPU the ring's compute took 1.3-2.8x a rank's share of SDPA's work at W = 4 on the
#: sweep shapes; gathered ran it in 0.45-0.80 of the ring's time, hybrid 0.66-0.88
#: (benchmarks/results/attention_gather/README.md).
ATTEND = ExtraDirective("attend", ("ring", "hybrid", "gathered"),
                        "compute form: ring = one FMHA call per source block merged by log-sum-exp; hybrid = the own "
                        "block first, then at most two merged calls over the other ranks' K/V gathered in one region; "
                        "gathered = all K/V in global token order, one bottom-right causal call per zigzag chunk, no "
                        "merges (fewer, larger calls: less compute, but each call waits for more of the data)")


def _gathered_forms(d: Directives, _s: DesignSpace) -> str | None:
    if d.get("attend") == "ring":
        return None
    placements = ("deferred", "stream_overlap", "fused") if d.get("attend") == "gathered" else (
        "deferred", "stream_overlap")
    if d.placement not in placements or d.issuer == "copy_engine":
        return (f"attend={d.get('attend')} pulls every source's rows into one region with an SM pull kernel and "
                f"waits per source: use placement {' or '.join(placements)} with issuer thread, warp or cta, or "
                "attend=ring")
    return None


def _copy_engine_barriers(d: Directives, _s: DesignSpace) -> str | None:
    if d.issuer == "copy_engine" and d.sync_scope not in ("world", "team"):
        return ("issuer=copy_engine is bracketed by barrier kernels on the copy stream (no CTA of ours polls a "
                "peer's flag); use sync_scope=world or team")
    return None


WORKLOAD_RULES: tuple[Rule, ...] = (
    Rule("attention-cp-chunks-only-fused", _chunks_only_fused),
    Rule("attention-cp-copy-engine-barriers", _copy_engine_barriers),
    Rule("attention-cp-gathered-forms", _gathered_forms),
    backend_subset("attention-cp-gin-subset", "gin",
                   "backend=gin is rendered as put-with-signal per ring step (placement=split_put_wait, "
                   "sync_scope=signal): GIN has no peer loads to pull with; pick those directives or backend=lsa",
                   placement=("split_put_wait",), sync_scope=("signal",)),
    lsa_one_node("attention-cp-lsa-one-node", "moves KV blocks by NVLink load/store"),
)
#: Two default rules do not hold here. signal-needs-chunks: the signals are per ring step (one source's block),
#: so sync_scope=signal at whole blocks is a barrier-free protocol of its own. copy-engine-transport's fused
#: clause: fused is the slice pipeline, whose transfers are issued on the side stream, where copy engines can
#: issue them (its GIN clause is kept by attention-cp-copy-engine-barriers and the GIN subset).
RULES = tuple(r for r in DEFAULT_RULES if r.name not in ("signal-needs-chunks", "copy-engine-transport")) + (
    WORKLOAD_RULES)


def space(topology: Topology) -> DesignSpace:
    """The ring-attention design space on `topology`: LSA on one node; GIN where a NIC may be present."""
    return DesignSpace(
        backends=backends_for(topology, ("lsa", "gin")),
        sync_scopes=("world", "team", "signal"),
        issuers=("thread", "warp", "cta", "copy_engine"),
        chunk_sizes=CHUNK_SIZES,
        topology=topology,
        rules=RULES,
        extras=(ATTEND,),
    )


def block(point: Directives) -> str:
    """The EVOLVE block of `point`: its constants, kernels, block_needs() and enqueue()."""
    if point.backend == "gin":
        return render_gin(point)
    return render_lsa(point, render_gather(point) if dict(point.extra).get("attend", "ring") != "ring" else None)


def render(point: Directives) -> str:
    """CUDA source of the candidate for `point`: frozen head and tail around one EVOLVE block. Pure; the point is not
    checked here: Workload.render checks it against the run's topology first."""
    return assemble(frozen.head(), block(point), frozen.TAIL)
