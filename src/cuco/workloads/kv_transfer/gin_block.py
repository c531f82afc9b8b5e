"""GIN block text (NCCL GIN device API: put with signal): placement=split_put_wait, sync_scope=signal.

Compile-verified here; it runs only where GIN is available (an RDMA NIC; the harness reports 'unsupported'
otherwise). The prefill rank puts each layer's pages (its own table) into the decode rank's staging area in token
order, one put per (plane, block), each raising the layer's signal; the decode rank waits for 2 x S/16 puts per
layer (signal shadows: signals count and are never reset) and scatters the layer into its pages (its own table).
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.kit.template import fill

COOP_OF = {"warp": "ncclCoopWarp", "cta": "ncclCoopCta"}

GIN_BLOCK = r"""
namespace cuco_kv {

// ---- design point: @LABEL@ ----
using Issuer = @COOP@;                    // issuer=@ISSUER@: the thread group issuing one put
constexpr int kCommCtas = @COMM_CTAS@;    // CTAs of the put kernel beside the layer compute
constexpr bool kCompute = true;           // false: the transfer path alone
constexpr int kSigClear = 0;              // signal 0: the decode rank's staging may be written; 1 + l: layer l

static Needs block_needs(const cuco_ctx* ctx) {
  const Geo g = geo_make(ctx->dims[0], ctx->dims[1], ctx->dims[2]);
  const Flags f{g.L, 1};
  Needs n;
  n.flag_bytes = local_flag_bytes(f);
  n.gin_signals = 1 + (int)g.L;
  n.gin_required = 1;
  return n;
}

static int block_setup(cuco_ctx* ctx, State* st) {
  if (!(st->role & ROLE_PREFILL)) return 0;
  return cuco_kvt_create(&st->plan, st->g.S, st->g.D, ctx->sm_count - kCommCtas, 0) ? 30 : 0;
}

// Layer l's pages into the pair's staging area (token order), one put per (plane, block), each raising signal 1 + l.
__global__ void __launch_bounds__(256) gin_put_layer(ncclDevComm dc, ncclWindow_t pages, ncclWindow_t stage,
                                                     const int32_t* table, Geo g, int64_t l, int pair) {
  ncclGin gin(dc, 0);
  const ncclTeam world = ncclTeamWorld(dc);
  const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
  const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(gridDim.x);
  const size_t bytes = (size_t)kBlockTokens * g.D * 2;
  for (int64_t j = (int64_t)group; j < 2 * g.nblk; j += (int64_t)ngroups) {
    const int kv = (int)(j & 1);
    const int64_t b = j / 2;
    const size_t dst = 2 * (size_t)(stage_layer_elem(g, l) + (kv * g.S + b * kBlockTokens) * g.D);
    gin.put(world, pair, stage, dst, pages, 2 * (size_t)page_elem(g, l, kv, table[b]), bytes,
            ncclGin_SignalInc{(ncclGinSignal_t)(1 + l)}, ncclGin_None{}, Issuer());
  }
  gin.flush(Issuer());
}

// Wait until signal `sig` has risen by `count` more (its shadow counts what was already consumed).
__global__ void gin_wait(ncclDevComm dc, int sig, int count) {
  if (threadIdx.x == 0) {
    ncclGin gin(dc, 0);
    gin.increaseSignalShadow((ncclGinSignal_t)sig, count);
    gin.waitSignalMeetShadow(ncclCoopThread(), (ncclGinSignal_t)sig);
  }
}

__global__ void gin_signal(ncclDevComm dc, int pair, int sig) {
  if (threadIdx.x == 0) {
    ncclGin gin(dc, 0);
    gin.signal(ncclTeamWorld(dc), pair, ncclGin_SignalInc{(ncclGinSignal_t)sig});
    gin.flush(ncclCoopThread());
  }
}

static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo& g = st->g;
  const Flags f{g.L, 1};
  cudaStream_t cs = ctx->stream, ss = ctx->side_stream;
  int rc = 0;
  if (st->role & ROLE_DECODE) {  // the staging area is free: the last launch's scatters are done (stream order)
    gin_signal<<<1, 32, 0, cs>>>(ctx->devcomm, st->pair, kSigClear);
    if ((rc = launch_ok())) return rc;
  }
  if (st->role & ROLE_PREFILL) {
    gin_wait<<<1, 32, 0, ss>>>(ctx->devcomm, kSigClear, 1);
    if ((rc = launch_ok())) return rc;
    for (int64_t l = 0; l < g.L; ++l) {
      if (kCompute && (rc = layer_front(ctx, st, l, cs))) return rc;
      if ((rc = stream_set_epoch(st, cs, ready_flag(ctx, f, l, 0)))) return rc;
      if (kCompute && (rc = layer_back(ctx, st, l, cs))) return rc;
      if ((rc = stream_wait_epoch(st, ss, ready_flag(ctx, f, l, 0)))) return rc;
      gin_put_layer<<<kCommCtas, 256, 0, ss>>>(ctx->devcomm, ctx->buffers[BUF_PCACHE].window,
                                               ctx->buffers[BUF_STAGE].window, ptab(ctx, st), g, l, st->pair);
      if ((rc = launch_ok())) return rc;
    }
  }
  if (st->role & ROLE_DECODE) {
    for (int64_t l = 0; l < g.L; ++l) {
      gin_wait<<<1, 32, 0, cs>>>(ctx->devcomm, (int)(1 + l), (int)(2 * g.nblk));
      if ((rc = launch_ok())) return rc;
      rc = cuco_kvt_copy_blocks(stage_of(own(ctx, BUF_STAGE), g, l),
                                pages_of(own(ctx, BUF_DCACHE), dtab(ctx, st), g, l), g.D, 0, g.nblk, 0,
                                2 * ctx->sm_count, cs);
      if (rc) return rc;
    }
  }
  return 0;
}

}  // namespace cuco_kv
"""


def render_gin(point: Directives, comm_ctas: int) -> str:
    """The GIN block of `point` (split_put_wait/signal, warp or CTA issuer), its put kernel on `comm_ctas` CTAs."""
    if point.placement != "split_put_wait" or point.sync_scope != "signal" or point.issuer not in COOP_OF:
        raise ValueError(f"the GIN template covers split_put_wait/signal with warp or cta issuers, not {point.label()}")
    return fill(GIN_BLOCK, {"LABEL": point.label(), "COOP": COOP_OF[point.issuer], "ISSUER": point.issuer,
                            "COMM_CTAS": comm_ctas}, what=f"kv_transfer gin block {point.label()}")
