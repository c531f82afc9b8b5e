"""Design space of the MoE workload and rendering of a device-initiated candidate from one of its points.

Every point runs the same three steps: route (slot counts and order published in symmetric memory), dispatch
(token rows to the experts' ranks, bf16 or fp8), expert FFN (the compute library), combine (gate-weighted
pull of the outputs). The directives choose how dispatch meets the FFN:

- deferred: gather every row, then the FFN, then combine.
- split_put_wait: each rank puts (pushes) its rows into the owners' receive rows: its own experts' rows on the
  compute stream, the others' on the side stream; own rows are computed while the puts fly, then a wait
  (barrier or per-source arrival signals) and the peers' rows.
- stream_overlap: own tokens' rows are gathered and computed while a few CTAs pull the peers' rows (or the copy
  engines push every rank's tokens) on the side stream; then the peers' rows are computed, one grouped-GEMM group
  per source, and the down GEMM's epilogue stores each group's outputs straight into its source's memory over
  NVLink: the combine reads local rows only, and no pass moves the outputs back.
- fused: all rows are pulled chunk by chunk on the side stream, each chunk raising its arrival flag; one FFN
  call over every row runs beside them on the SMs the pulls leave free, its up GEMM waiting in the kernel, tile by
  tile, for the flags of the chunks holding the tile's rows (`row_arrival.cuh`), so it starts on the first chunk
  that lands and no FFN is cut into calls.
- sync_scope: world = LSA barriers; signal = per-source epoch flags (ready, outputs ready, done reading, rows
  arrived), no barrier at all.
- issuer: thread / warp / cta rows per issuer group; copy_engine = DMA copies of whole token blocks into each
  rank's staging area (deferred pulls them; stream_overlap pushes its own into every peer's, then a barrier),
  then a local gather.
- chunk_bytes: rows per chunk of the fused pipeline = chunk_bytes / (2 H).
- backend=gin (compiled; runs only with an RDMA NIC): split_put_wait with per-put signals, every byte by put
  (gin_block.py).
- dispatch_dtype (workload directive): bf16, or fp8 e4m3 with one fp32 scale per 128 channels, quantised once
  per token by the source and dequantised to bf16 by the receiver as it pulls.
"""

from __future__ import annotations

from cuco.design_space import DEFAULT_RULES, MiB, WHOLE, DesignSpace, Directives, Rule, Topology
from cuco.extra_directives import ExtraDirective
from cuco.kit.evolve import assemble
from cuco.kit.space import backend_subset, backends_for, lsa_one_node
from cuco.kit.template import fill
from cuco.workloads.moe import frozen
from cuco.workloads.moe.gin_block import COOP_OF, GIN_BLOCK, GIN_ENQUEUE, GIN_KERNELS
from cuco.workloads.moe.nvshmem_block import NV_BLOCK, NV_ENQUEUE, NV_KERNELS, PUT_OF
from cuco.workloads.moe.put_protocol import PUT_SHARED_KERNELS

CHUNK_SIZES = (WHOLE, 4 * MiB, 1 * MiB)
DISPATCH_DTYPE = ExtraDirective("dispatch_dtype", ("bf16", "fp8"),
                                "payload of the token dispatch: bf16, or fp8 e4m3 with per-128-channel fp32 scales "
                                "(dequantised to bf16 on receive)")
GROUP_OF = {"thread": 1, "warp": 32, "cta": 0, "copy_engine": 0}
COMM_CTAS = 16  # CTAs of a pull/push kernel beside the FFN (the FFN keeps the other SMs)


def _chunks_only_fused(d: Directives, _s: DesignSpace) -> str | None:
    if d.placement == "fused" and (d.chunk_bytes == WHOLE or d.sync_scope != "signal"):
        return ("placement=fused pipelines chunks with per-chunk arrival flags: it needs sync_scope=signal and a "
                "chunk size")
    if d.placement != "fused" and d.chunk_bytes != WHOLE:
        return (f"placement={d.placement} moves the rows of one phase in one kernel, so chunks change nothing; use "
                "chunk_bytes=whole, or placement=fused for a chunk pipeline")
    return None


def _copy_engine_subset(d: Directives, _s: DesignSpace) -> str | None:
    if d.issuer != "copy_engine":
        return None
    if d.placement not in ("deferred", "stream_overlap") or d.sync_scope != "world":
        return ("issuer=copy_engine copies whole token blocks into the ranks' staging areas (the host cannot see "
                "the device-side counts a row-wise copy needs) and is rendered for placement=deferred or "
                "stream_overlap with sync_scope=world")
    if d.get("dispatch_dtype") != "bf16":
        return "issuer=copy_engine moves bf16 token blocks; use dispatch_dtype=bf16 or an SM issuer for fp8"
    return None


def _fp8_pulls(d: Directives, _s: DesignSpace) -> str | None:
    if d.get("dispatch_dtype") == "fp8" and d.placement == "split_put_wait":
        return ("dispatch_dtype=fp8 is dequantised by the receiver as it pulls; split_put_wait pushes bf16 rows. "
                "Use a pull placement (deferred, stream_overlap, fused) for fp8")
    return None


WORKLOAD_RULES: tuple[Rule, ...] = (
    Rule("moe-chunks-only-fused", _chunks_only_fused),
    Rule("moe-copy-engine-subset", _copy_engine_subset),
    Rule("moe-fp8-pulls", _fp8_pulls),
    lsa_one_node("moe-lsa-one-node", "pulls and pushes by NVLink load/store"),
    backend_subset("moe-gin-subset", "gin",
                   "backend=gin is rendered as puts with signals (placement=split_put_wait, sync_scope=signal) of "
                   "bf16 rows: GIN has no peer loads to pull with, no barrier the candidate ABI declares, and no fp8 "
                   "template; pick those directives or backend=lsa",
                   placement=("split_put_wait",), sync_scope=("signal",), dispatch_dtype=("bf16",)),
    backend_subset("moe-nvshmem-subset", "nvshmem",
                   "backend=nvshmem is rendered as puts with signals (placement=split_put_wait, sync_scope=signal) of "
                   "bf16 rows by an SM issuer; pick those directives or backend=lsa",
                   placement=("split_put_wait",), sync_scope=("signal",), dispatch_dtype=("bf16",),
                   issuer=("thread", "warp", "cta")),
)
#: signal-needs-chunks does not hold here: MoE's signals are per source (ready, outputs, done, arrived), not
#: per chunk, so sync_scope=signal with whole buffers is a barrier-free protocol of its own.
RULES = tuple(r for r in DEFAULT_RULES if r.name != "signal-needs-chunks") + WORKLOAD_RULES


def space(topology: Topology) -> DesignSpace:
    """The MoE design space on `topology`: LSA on one node; GIN where a NIC may be present (compiled here)."""
    return DesignSpace(
        backends=backends_for(topology, ("lsa", "gin", "nvshmem")),
        sync_scopes=("world", "signal"),
        issuers=("thread", "warp", "cta", "copy_engine"),
        chunk_sizes=CHUNK_SIZES,
        topology=topology,
        rules=RULES,
        extras=(DISPATCH_DTYPE,),
    )


# ---- block text ---------------------------------------------------------------------------------------------

BLOCK = r"""
namespace cuco_moe {

// ---- design point: @LABEL@ ----
constexpr int kGroup = @GROUP@;          // issuer=@ISSUER@: threads moving one row (0: the whole CTA)
constexpr bool kFp8 = @FP8@;             // dispatch_dtype=@DTYPE@
constexpr int kCommCtas = @COMM_CTAS@;   // CTAs of the communication kernel beside the FFN
constexpr int64_t kChunkBytes = @CHUNK@;  // chunk_bytes=@CHUNK_NAME@

static int64_t chunk_rows(const Geo& g) {
  int64_t r = kChunkBytes ? kChunkBytes / (2 * g.H) : g.rows_cap;
  return r < 16 ? 16 : r;
}
static int nchunks(const Geo& g) { return (int)((g.rows_cap + chunk_rows(g) - 1) / chunk_rows(g)); }

static Needs block_needs(const cuco_ctx* ctx) {
  Geo g = geo_make(ctx->dims, ctx->world, ctx->rank);
  Needs n;
  // chunk flags | chunk CTA counters
  n.flag_bytes = 8 * (size_t)nchunks(g) + 256;
  n.lsa_barriers = 1;
  n.comm_ctas = @NEEDS_COMM@;
  n.outputs_at_sources = @OUTPUTS_AT_SOURCES@;
  n.rows_arriving = @ROWS_ARRIVING@;
  return n;
}

static int block_setup(cuco_ctx*, State*) { return 0; }  // nothing to prepare beyond the frozen setup

static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo& g = st->g;
  cudaStream_t cs = ctx->stream, ss = ctx->side_stream;
  int rc = 0;
  (void)ss;
@START@
  if ((rc = route(ctx, st, kFp8, cs))) return rc;
@PUBLISHED@
  if ((rc = tables(ctx, st, cs))) return rc;
@DISPATCH_AND_FFN@
@OUTPUTS_READY@
  if ((rc = combine(ctx, st, cs@RETURNED@))) return rc;
@FINISHED@
  return 0;
}

}  // namespace cuco_moe
"""

# Pull everything with every SM, then the FFN on every SM.
DEFERRED = r"""
  // placement=deferred: gather every row, then the FFN
@STAGE@
  gather_kernel<kGroup, kFp8><<<2 * ctx->sm_count, 256, 0, cs>>>(
      g, st->x, st->pub, st->P, W<int64_t>(st, st->L.rowmap), W<int64_t>(st, st->L.total), SRC_ALL, @STAGE_PTR@,
      Pub<__nv_bfloat16>(st, st->P.recv));
  if ((rc = launch_ok())) return rc;
  if ((rc = ffn(ctx, st, st->ffn_all, GROUPS_ALL, cs))) return rc;"""

#: The side stream forks and moves the peers' rows (@SIDE@) while the compute stream gathers and computes the own
#: tokens' rows; then the peers' rows (@PEERS_FROM_STAGE@: out of the copy engines' staging), their outputs stored at
#: their sources by the down GEMM's epilogue.
STREAM_OVERLAP = r"""
  // placement=stream_overlap: peers' rows move on the side stream while own tokens' rows are computed; the peers'
  // rows' outputs go straight back to their sources
  if (cudaEventRecord(st->ev[0], cs) != cudaSuccess || cudaStreamWaitEvent(ss, st->ev[0], 0) != cudaSuccess) return 70;
@SIDE@
  if (cudaEventRecord(st->ev[1], ss) != cudaSuccess) return 71;
  gather_kernel<kGroup, kFp8><<<2 * ctx->sm_count, 256, 0, cs>>>(
      g, st->x, st->pub, st->P, W<int64_t>(st, st->L.rowmap), W<int64_t>(st, st->L.total), SRC_OWN, nullptr,
      Pub<__nv_bfloat16>(st, st->P.recv));
  if ((rc = launch_ok())) return rc;
  if ((rc = ffn(ctx, st, @OWN_PLAN@, GROUPS_OWN, cs))) return rc;
  if (cudaStreamWaitEvent(cs, st->ev[1], 0) != cudaSuccess) return 72;
@PEERS_FROM_STAGE@
  if ((rc = ffn_to_sources(ctx, st, cs))) return rc;"""

PEERS_FROM_STAGE = r"""  gather_kernel<kGroup, kFp8><<<2 * ctx->sm_count, 256, 0, cs>>>(
      g, st->x, st->pub, st->P, W<int64_t>(st, st->L.rowmap), W<int64_t>(st, st->L.total), SRC_PEERS,
      Pub<__nv_bfloat16>(st, st->P.stage), Pub<__nv_bfloat16>(st, st->P.recv));
  if ((rc = launch_ok())) return rc;"""

SIDE_PULL = r"""  gather_kernel<kGroup, kFp8><<<kCommCtas, 256, 0, ss>>>(
      g, st->x, st->pub, st->P, W<int64_t>(st, st->L.rowmap), W<int64_t>(st, st->L.total), SRC_PEERS, nullptr,
      Pub<__nv_bfloat16>(st, st->P.recv));
  if ((rc = launch_ok())) return rc;"""

SIDE_COPY_ENGINE = r"""  if ((rc = stage_pushes(st, ss))) return rc;  // issuer=copy_engine: DMA into the peers' staging, no SM
  if ((rc = barrier(ctx, ss))) return rc;  // every rank's pushes have landed"""

SPLIT_PUT_WAIT = r"""
  // placement=split_put_wait: put own rows locally and the peers' rows remotely, compute own rows, wait, the rest
  if (cudaEventRecord(st->ev[0], cs) != cudaSuccess || cudaStreamWaitEvent(ss, st->ev[0], 0) != cudaSuccess) return 70;
  push_kernel<kGroup><<<kCommCtas, 256, 0, ss>>>(g, (const __nv_bfloat16*)ctx->buffers[BUF_X].ptr,
      (const int32_t*)ctx->buffers[BUF_EXPERT].ptr, W<int32_t>(st, st->L.slot_rank), W<int64_t>(st, st->L.cbase),
      st->pub, st->P, 0);
  if ((rc = launch_ok())) return rc;
@ARRIVED_SIGNAL@
  if (cudaEventRecord(st->ev[1], ss) != cudaSuccess) return 71;
  push_kernel<kGroup><<<2 * ctx->sm_count, 256, 0, cs>>>(g, (const __nv_bfloat16*)ctx->buffers[BUF_X].ptr,
      (const int32_t*)ctx->buffers[BUF_EXPERT].ptr, W<int32_t>(st, st->L.slot_rank), W<int64_t>(st, st->L.cbase),
      st->pub, st->P, 1);
  if ((rc = launch_ok())) return rc;
  if ((rc = ffn(ctx, st, st->ffn_part, GROUPS_OWN, cs))) return rc;
  if (cudaStreamWaitEvent(cs, st->ev[1], 0) != cudaSuccess) return 72;
@ARRIVED_WAIT@
  if ((rc = ffn(ctx, st, st->ffn_all, GROUPS_PEERS, cs))) return rc;"""

FUSED = r"""
  // placement=fused: one FFN over every row while the side stream pulls them chunk by chunk; the up GEMM starts a
  // tile as soon as the chunks of its rows have landed (it waits in the kernel, on comm_ctas fewer SMs); the pulls
  // are launched first, so that their kernel is loaded before anything waits for it
  uint32_t* flag = local_flags(ctx);
  uint32_t* counter = flag + nchunks(g);
  if (cudaEventRecord(st->ev[0], cs) != cudaSuccess || cudaStreamWaitEvent(ss, st->ev[0], 0) != cudaSuccess) return 70;
  gather_chunks_kernel<kGroup, kFp8><<<kCommCtas, 256, 0, ss>>>(
      g, st->x, st->pub, st->P, W<int64_t>(st, st->L.rowmap), W<int64_t>(st, st->L.total), chunk_rows(g),
      nchunks(g), counter, flag, st->epoch_at, Pub<__nv_bfloat16>(st, st->P.recv));
  if ((rc = launch_ok())) return rc;
  if ((rc = ffn_arriving(ctx, st, flag, chunk_rows(g), cs))) return rc;
  // the pulls have ended before anything reuses their rows (and the exchange alone, with no FFN, waits here)
  if (cudaEventRecord(st->ev[1], ss) != cudaSuccess) return 71;
  if (cudaStreamWaitEvent(cs, st->ev[1], 0) != cudaSuccess) return 72;"""

SYNC = {
    # (start, published, outputs ready, finished)
    "world": ("", "  if ((rc = barrier(ctx, cs))) return rc;  // sync_scope=world: counts, order, tokens published",
              "  if ((rc = barrier(ctx, cs))) return rc;  // every expert output is written",
              "  if ((rc = barrier(ctx, cs))) return rc;  // nobody reads this launch's buffers any more"),
    "signal": ("  // sync_scope=signal: peers finished reading what the previous launch published\n"
               "  if ((rc = wait_all(ctx, st, cs, SIG_DONE, kPrevLaunch))) return rc;",
               "  if ((rc = signal_all(ctx, st, cs, SIG_READY)) || (rc = wait_all(ctx, st, cs, SIG_READY, kThisLaunch)))"
               " return rc;",
               "  if ((rc = signal_all(ctx, st, cs, SIG_OUT)) || (rc = wait_all(ctx, st, cs, SIG_OUT, kThisLaunch)))"
               " return rc;",
               "  if ((rc = signal_all(ctx, st, cs, SIG_DONE))) return rc;  // the next launch waits for it"),
}


def _dispatch(point: Directives) -> str:
    ce = point.issuer == "copy_engine"
    if point.placement == "deferred":
        return fill(DEFERRED, {
            "STAGE": "  if ((rc = stage_pulls(st, cs))) return rc;  // issuer=copy_engine: DMA, no SM" if ce else "",
            "STAGE_PTR": "Pub<__nv_bfloat16>(st, st->P.stage)" if ce else "nullptr"}, what="deferred")
    if point.placement == "stream_overlap":
        return fill(STREAM_OVERLAP, {"SIDE": SIDE_COPY_ENGINE if ce else SIDE_PULL,
                                     "OWN_PLAN": "st->ffn_all" if ce else "st->ffn_part",
                                     "PEERS_FROM_STAGE": PEERS_FROM_STAGE if ce else ""}, what="stream_overlap")
    if point.placement == "split_put_wait":
        if point.sync_scope == "world":
            arrived = "  if ((rc = barrier(ctx, ss))) return rc;  // every rank's puts have landed"
            wait = ""
        else:
            arrived = "  if ((rc = signal_all(ctx, st, ss, SIG_ARRIVED))) return rc;  // my rows landed at every owner"
            wait = "  if ((rc = wait_all(ctx, st, cs, SIG_ARRIVED, kThisLaunch))) return rc;  // per-source arrival"
        return fill(SPLIT_PUT_WAIT, {"ARRIVED_SIGNAL": arrived, "ARRIVED_WAIT": wait}, what="split_put_wait")
    return FUSED


def _outputs_at_sources(point: Directives) -> bool:
    """Whether the point's FFN stores the peers' rows' outputs at their sources (then the combine reads local rows)."""
    return point.backend == "lsa" and point.placement == "stream_overlap"


def _uses_comm_ctas(point: Directives) -> bool:
    return point.placement in ("split_put_wait", "fused") or (point.placement == "stream_overlap"
                                                              and point.issuer != "copy_engine")


def _gin_block(point: Directives) -> str:
    kernels = fill(GIN_KERNELS, {"COOP": COOP_OF[point.issuer], "ISSUER": point.issuer,
                                 "SHARED": PUT_SHARED_KERNELS}, what="moe gin kernels")
    return fill(GIN_BLOCK, {"LABEL": point.label(), "GROUP": GROUP_OF[point.issuer], "ISSUER": point.issuer,
                            "COMM_CTAS": COMM_CTAS, "KERNELS": kernels, "ENQUEUE": GIN_ENQUEUE},
                what=f"moe block {point.label()}")


def _nvshmem_block(point: Directives) -> str:
    kernels = fill(NV_KERNELS, {"COOP": COOP_OF[point.issuer], "ISSUER": point.issuer, "PUT": PUT_OF[point.issuer],
                                "SHARED": PUT_SHARED_KERNELS}, what="moe nvshmem kernels")
    return fill(NV_BLOCK, {"LABEL": point.label(), "GROUP": GROUP_OF[point.issuer], "ISSUER": point.issuer,
                           "COMM_CTAS": COMM_CTAS, "KERNELS": kernels, "ENQUEUE": NV_ENQUEUE},
                what=f"moe block {point.label()}")


def block(point: Directives) -> str:
    """The EVOLVE block of `point`: its constants, block_needs() and enqueue()."""
    if point.backend == "gin":
        return _gin_block(point)
    if point.backend == "nvshmem":
        return _nvshmem_block(point)
    start, published, outputs, finished = SYNC[point.sync_scope]
    dtype = point.get("dispatch_dtype")
    return fill(BLOCK, {
        "LABEL": point.label(),
        "GROUP": GROUP_OF[point.issuer],
        "ISSUER": point.issuer,
        "FP8": "true" if dtype == "fp8" else "false",
        "DTYPE": dtype,
        "COMM_CTAS": COMM_CTAS,
        "CHUNK": point.chunk_bytes,
        "CHUNK_NAME": "whole" if point.chunk_bytes == WHOLE else f"{point.chunk_bytes // MiB}MiB",
        "NEEDS_COMM": "kCommCtas" if _uses_comm_ctas(point) else "0",
        "OUTPUTS_AT_SOURCES": "true" if _outputs_at_sources(point) else "false",
        "ROWS_ARRIVING": "true" if point.placement == "fused" else "false",
        "START": start,
        "PUBLISHED": published,
        "DISPATCH_AND_FFN": _dispatch(point),
        "OUTPUTS_READY": outputs,
        "RETURNED": ", true" if _outputs_at_sources(point) else "",
        "FINISHED": finished,
    }, what=f"moe block {point.label()}")


def render(point: Directives) -> str:
    """CUDA source of the candidate for `point`: frozen head and tail around one EVOLVE block. Pure; the point is not
    checked here: Workload.render checks it against the run's topology first."""
    return assemble(frozen.head(), block(point), frozen.TAIL)


FFN_ON = "constexpr bool kFfn = true;"
COMBINE_ON = "constexpr bool kCombine = true;"


def render_exchange_path(point: Directives, combine: bool = True) -> str:
    """The candidate of an LSA `point` with its expert FFN switched off, and its combine too where combine=False:
    the dispatch and combine alone, or the dispatch alone, as benchmarks/moe.py times them. It moves the bytes and
    computes nothing, so it cannot verify. GIN and NVSHMEM points combine with puts the switch does not reach."""
    if point.backend != "lsa":
        raise ValueError(f"the exchange alone is rendered for LSA points, not {point.label()}")
    code = render(point)
    for on in (FFN_ON,) if combine else (FFN_ON, COMBINE_ON):
        if code.count(on) != 1:
            raise AssertionError(f"the frozen head lost its switch {on!r}")
        code = code.replace(on, on.replace("true", "false"))
    return code
