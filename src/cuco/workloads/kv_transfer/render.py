"""Design space of the KV-transfer workload and rendering of a device-initiated candidate from one of its points.

Every point runs the same layer stack on the prefill rank (the compute library) and must leave every layer's K and
V in the decode rank's pages under the decode rank's block table. The directives choose how the bytes move:

- deferred: after all L layers, one transfer per layer straight from the prefill pages into the decode pages (the
  decode table read through LSA), on every SM.
- stream_overlap: layer l's pages leave on the high-priority side stream (kCommCtas CTAs) as soon as layer l's K/V
  are written, while layer l+1 computes; issuer=copy_engine instead copies layer l's K/V rows
  (two strided DMA copies, no SM) into the decode rank's staging area, which the decode rank scatters into its
  pages after a barrier.
- split_put_wait: put kernels (side stream) move each computed layer, chunk by chunk, into the decode rank's
  staging area; the decode rank's wait half waits for each chunk (a flag, or one barrier) and scatters it into its
  pages with its own table.
- fused: the K/V projection is issued in chunks of whole blocks and each chunk's blocks leave for the decode pages
  straight from the projection output as soon as its GEMM is done (an event, no SM held). cuBLASLt has
  no custom epilogue, so this is the closest form of "writes from the projection epilogue": per-chunk puts behind
  per-chunk GEMMs, not stores inside the GEMM.
- sync_scope: world = LSA barriers; signal = per-layer (or per-chunk) epoch flags in the decode rank's symmetric
  workspace, no barrier.
- issuer: threads moving one block (thread 1, warp 32, cta 256), or the copy engines.
- chunk_bytes: K and V bytes per chunk (whole blocks): the pipelining granularity of split_put_wait and fused.
- backend=gin (compiled; runs only with an RDMA NIC): split_put_wait/signal, pages put into the decode staging with
  one signal per layer (gin_block.py).
"""

from __future__ import annotations

from cuco.design_space import DEFAULT_RULES, MiB, WHOLE, DesignSpace, Directives, Rule, Topology
from cuco.kit.evolve import assemble
from cuco.kit.space import backend_subset, backends_for, lsa_one_node
from cuco.kit.template import fill
from cuco.workloads.kv_transfer import frozen
from cuco.workloads.kv_transfer.blocks import DECODE_STAGED, PREFILL, SIGNAL_CHUNK, SIGNAL_LAYER
from cuco.workloads.kv_transfer.gin_block import render_gin

CHUNK_SIZES = (WHOLE, 4 * MiB, 1 * MiB, MiB // 4)
GROUP_OF = {"thread": 1, "warp": 32, "cta": 0, "copy_engine": 0}
COMM_CTAS = 16  # CTAs of a transfer kernel beside the layer compute (on the side stream, as SMs come free)
COMPUTE_ON = "constexpr bool kCompute = true;"


def _chunks(d: Directives, _s: DesignSpace) -> str | None:
    if d.placement == "fused" and d.chunk_bytes == WHOLE:
        return "placement=fused sends each chunk of the K/V projection as it is computed: give it a chunk size"
    if d.placement in ("deferred", "stream_overlap") and d.chunk_bytes != WHOLE:
        return (f"placement={d.placement} moves a whole layer once its K/V exist, so chunks change nothing; use "
                "chunk_bytes=whole, or split_put_wait / fused for a chunk pipeline")
    return None


def _copy_engine(d: Directives, _s: DesignSpace) -> str | None:
    if d.issuer == "copy_engine" and (d.placement != "stream_overlap" or d.sync_scope != "world"):
        return ("issuer=copy_engine copies each layer's K/V rows into the decode rank's staging area (the host cannot "
                "read the device-side block tables a page-wise copy needs) and is bracketed by barriers: use "
                "placement=stream_overlap with sync_scope=world")
    return None


WORKLOAD_RULES: tuple[Rule, ...] = (
    Rule("kv-chunks", _chunks),
    Rule("kv-copy-engine", _copy_engine),
    backend_subset("kv-gin-subset", "gin",
                   "backend=gin is rendered as page puts with one signal per layer (placement=split_put_wait, "
                   "sync_scope=signal, issuer=warp or cta, chunk_bytes=whole); GIN has no peer loads and the "
                   "candidate ABI declares no GIN barrier",
                   placement=("split_put_wait",), sync_scope=("signal",), issuer=("warp", "cta"),
                   chunk_bytes=(WHOLE,)),
    lsa_one_node("kv-lsa-one-node", "writes the decode pages by NVLink stores"),
)
#: signal-needs-chunks does not hold here: signals are per layer even with whole-layer transfers (L flags per
#: launch, never a barrier).
RULES = tuple(r for r in DEFAULT_RULES if r.name != "signal-needs-chunks") + WORKLOAD_RULES


def space(topology: Topology) -> DesignSpace:
    """The KV-transfer design space on `topology`: LSA on one node; GIN where a NIC may be present (compiled here)."""
    return DesignSpace(
        backends=backends_for(topology, ("lsa", "gin")),
        sync_scopes=("world", "signal"),
        issuers=("thread", "warp", "cta", "copy_engine"),
        chunk_sizes=CHUNK_SIZES,
        topology=topology,
        rules=RULES,
    )


BLOCK = r"""
namespace cuco_kv {

// ---- design point: @LABEL@ ----
constexpr int kGroup = @GROUP@;           // issuer=@ISSUER@: threads moving one block (0: a CTA of 256)
constexpr int kCommCtas = @COMM_CTAS@;    // CTAs of the transfer kernels beside the layer compute
constexpr int64_t kChunkBytes = @CHUNK@;  // chunk_bytes=@CHUNK_NAME@ (K and V bytes per chunk, whole blocks)
constexpr bool kCompute = true;           // false: the transfer path alone (what copy_gbps is measured on)

static Flags flags_of(const Geo& g) { return Flags{g.L, token_chunks(g, kChunkBytes).nchunks}; }

static Needs block_needs(const cuco_ctx* ctx) {
  const Geo g = geo_make(ctx->dims[0], ctx->dims[1], ctx->dims[2]);
  Needs n;
  n.flag_bytes = local_flag_bytes(flags_of(g));
  n.sym_bytes = sym_flag_bytes(flags_of(g));
  n.lsa_barriers = @BARRIERS@;
  return n;
}

// The layer plan: GEMMs on every SM, K/V projection chunks of @PLAN_CHUNK_NAME@. Transfer kernels beside the
// compute run on the high-priority side stream and take their SMs as the GEMMs' CTAs retire: a few percent of the
// time, where a plan that kept kCommCtas SMs free would give them up for the whole stack.
static int block_setup(cuco_ctx* ctx, State* st) {
  if (!(st->role & ROLE_PREFILL)) return 0;
  if (int rc = make_events(st, flags_of(st->g).nchunks)) return rc;  // the streams' order (make_events)
  const int sms = 0;
  const int64_t chunk_rows = @PLAN_CHUNK@;
  return cuco_kvt_create(&st->plan, st->g.S, st->g.D, sms, chunk_rows) ? 30 : 0;
}

static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo& g = st->g;
  const Flags f = flags_of(g);
  const cuco::kit::Chunking ch = token_chunks(g, kChunkBytes);
  cudaStream_t cs = ctx->stream, ss = ctx->side_stream;
  int rc = 0;
  (void)f, (void)ch, (void)ss;
  if (st->role & ROLE_PREFILL) {
@PREFILL@
  }
@MIDDLE@
  if (st->role & ROLE_DECODE) {
@DECODE@
  }
@FINISH@
  return 0;
}

}  // namespace cuco_kv
"""

_STAGED_WORLD_MIDDLE = ("  if ((rc = join_side(ctx, st, cs)) || (rc = barrier(ctx, cs))) return rc;  "
                        "// every rank's puts have landed")
_STAGED_WORLD_DECODE = r"""    for (int64_t l = 0; l < g.L; ++l)  // staged layers into own pages (own table)
      if ((rc = cuco_kvt_copy_blocks(stage_of(own(ctx, BUF_STAGE), g, l),
                                     pages_of(own(ctx, BUF_DCACHE), dtab(ctx, st), g, l), g.D, 0, g.nblk, 0,
                                     2 * ctx->sm_count, cs)))
        return rc;"""
_STAGED_WORLD_FINISH = "  if ((rc = barrier(ctx, cs))) return rc;  // the staging area may be written again"
_DIRECT_WORLD_FINISH = ("  if ((rc = join_side(ctx, st, cs)) || (rc = barrier(ctx, cs))) return rc;  "
                        "// sync_scope=world: every page has landed")
_DIRECT_SIGNAL_DECODE = r"""    cudaStream_t ds;  // the decode side's stream (decode_begin)
    if ((rc = decode_begin(ctx, st, &ds))) return rc;
    for (int64_t l = 0; l < g.L; ++l)  // sync_scope=signal: every arrival flag
      for (int c = 0; c < f.nchunks; ++c)
        if ((rc = wait_own(ctx, st, f.arrived(l, c), kThisLaunch, ds))) return rc;
    if ((rc = decode_end(ctx, st, ds))) return rc;"""


def _parts(point: Directives) -> dict[str, str]:
    """PREFILL, MIDDLE, DECODE and FINISH of an LSA point."""
    signal = point.sync_scope == "signal"
    staged = point.placement == "split_put_wait" or point.issuer == "copy_engine"
    key = "copy_engine" if point.issuer == "copy_engine" else point.placement
    sig_layer = fill(SIGNAL_LAYER, {"STREAM": "cs" if point.placement == "deferred" else "ss"},
                     what="signal") if signal else ""
    values = {"SIGNAL_LAYER": sig_layer, "SIGNAL_CHUNK": SIGNAL_CHUNK if signal else "",
              "WAIT_DONE": ("    if ((rc = wait_own(ctx, st, f.done(), kPrevLaunch, ss))) return rc;  "
                            "// the decode rank consumed the last staging") if signal else ""}
    template = PREFILL[key]
    prefill = fill(template, {k: v for k, v in values.items() if f"@{k}@" in template}, what=f"prefill {key}")
    if staged and signal:
        return {"PREFILL": prefill, "MIDDLE": "", "DECODE": DECODE_STAGED, "FINISH": ""}
    if staged:
        return {"PREFILL": prefill, "MIDDLE": _STAGED_WORLD_MIDDLE, "DECODE": _STAGED_WORLD_DECODE,
                "FINISH": _STAGED_WORLD_FINISH}
    if signal:
        return {"PREFILL": prefill, "MIDDLE": "", "DECODE": _DIRECT_SIGNAL_DECODE, "FINISH": ""}
    return {"PREFILL": prefill, "MIDDLE": "", "DECODE": "", "FINISH": _DIRECT_WORLD_FINISH}


def block(point: Directives) -> str:
    """The EVOLVE block of `point`: its constants, block_needs(), block_setup() and enqueue()."""
    if point.backend == "gin":
        return render_gin(point, COMM_CTAS)
    fused = point.placement == "fused"
    return fill(BLOCK, {
        "LABEL": point.label(),
        "GROUP": GROUP_OF[point.issuer],
        "ISSUER": point.issuer,
        "COMM_CTAS": COMM_CTAS,
        "CHUNK": point.chunk_bytes,
        "CHUNK_NAME": "whole" if point.chunk_bytes == WHOLE else f"{point.chunk_bytes // 1024}KiB",
        "BARRIERS": "1" if point.sync_scope == "world" else "0",
        "PLAN_CHUNK": "token_chunks(st->g, kChunkBytes).chunk_rows" if fused else "0",
        "PLAN_CHUNK_NAME": "the chunk size" if fused else "none (one GEMM per layer)",
        **_parts(point),
    }, what=f"kv_transfer block {point.label()}")


def render(point: Directives) -> str:
    """CUDA source of the candidate for `point`: frozen head and tail around one EVOLVE block. Pure; the point is not
    checked here: Workload.render checks it against the run's topology first."""
    return assemble(frozen.head(), block(point), frozen.TAIL)


def render_transfer_path(point: Directives) -> str:
    """The candidate of `point` with its layer compute switched off: only its transfer path (kernels or copies,
    flags, barriers) runs, on whatever the buffers hold. It cannot verify; benchmarks time it for copy_gbps."""
    code = render(point)
    if code.count(COMPUTE_ON) != 1:
        raise AssertionError("the block template lost its kCompute switch")
    return code.replace(COMPUTE_ON, "constexpr bool kCompute = false;")
