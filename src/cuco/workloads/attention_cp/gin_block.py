"""GIN block text of the ring-attention workload (NCCL GIN device API: put with signal): placement=split_put_wait,
sync_scope=signal, whole blocks.

Compile-verified here; it runs only where GIN is available (an RDMA NIC; the harness reports 'unsupported'
otherwise). Signals count and are never reset: each launch raises the expected value through the signal's shadow.
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.kit.template import fill
from cuco.workloads.attention_cp.lsa_block import ENQUEUE_HEAD, ISSUER_TYPES

GIN_BLOCK = r"""
namespace cuco_cp {

// ---- design point: @LABEL@ ----
using Issuer = @ISSUER@;  // issuer=@ISSUER_NAME@: the thread group that issues a put
constexpr int kCommCtas = 4;
constexpr int kCommThreads = 128;
// Signal 0: "my ring may be written" handshake at the start of each launch. Signal s (1 <= s < W): the block of
// my ring step s landed (its K and V puts: two increments per launch).
constexpr int kSigClear = 0;

static Needs block_needs(const cuco_ctx* ctx) {
  const Geo g = geo_of(ctx);
  Needs n = flag_needs(g, 1);
  n.sym_bytes = 0;
  n.gin_signals = g.W;
  n.gin_required = 1;
  return n;
}

// Put this rank's K and V rows into ring slot `me` of every reader (rank me + s, its step s), only the rows it
// needs; the puts are handed round-robin to issuer groups.
__global__ void __launch_bounds__(kCommThreads)
    gin_put_kernel(ncclDevComm dc, ncclWindow_t win_kv, ncclWindow_t win_ring, Flags f, Geo g, int me,
                   const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  ncclGin gin(dc, 0);
  const ncclTeam world = ncclTeamWorld(dc);
  if (blockIdx.x == 0 && threadIdx.x == 0) {  // every reader finished its previous launch
    for (int q = 0; q < g.W; ++q)
      if (q != me) gin.signal(world, q, ncclGin_SignalInc{(ncclGinSignal_t)kSigClear});
    gin.increaseSignalShadow(kSigClear, g.W - 1);
    gin.waitSignalMeetShadow(ncclCoopThread(), kSigClear);
    cuco::lsa::store_release_sys(&f.local[f.lf.misc(1)], epoch);
  }
  cuco::lsa::cta_wait_epoch(&f.local[f.lf.misc(1)], epoch);
  const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
  const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(gridDim.x);
  const size_t rb = 2 * kv_row_elems(g), half_block = (size_t)g.Sr * rb;
  size_t job = 0;
  for (int s = 1; s < g.W; ++s) {
    const int t = (me + s) % g.W;
    const size_t bytes = (size_t)kv_rows_needed(g, t, me) * rb;
    for (int part = 0; part < 2; ++part, ++job) {  // K rows, then V rows
      if (job % ngroups != group) continue;
      gin.put(world, t, win_ring, me * block_bytes(g) + part * half_block, win_kv, part * half_block, bytes,
              ncclGin_SignalInc{(ncclGinSignal_t)s}, ncclGin_None{}, Issuer());
    }
  }
  gin.flush(Issuer());  // our KV may be refilled once the launch completes
}

// The wait half: the block of ring step s landed (both of its puts).
__global__ void gin_wait_kernel(ncclDevComm dc, int s) {
  if (threadIdx.x == 0) {
    ncclGin gin(dc, 0);
    gin.increaseSignalShadow((ncclGinSignal_t)s, 2);
    gin.waitSignalMeetShadow(ncclCoopThread(), (ncclGinSignal_t)s);
  }
}

// placement=split_put_wait over GIN: put kernel (side stream) | own block | per step: wait kernel, attention.
@ENQUEUE_HEAD@  gin_put_kernel<<<kCommCtas, kCommThreads, 0, side>>>(ctx->devcomm, ctx->buffers[BUF_KV].window,
                                                      ctx->buffers[BUF_RING].window, f, g, ctx->rank, st->epoch_at);
  if ((rc = launch_ok())) return rc;
  for (int s = 0; s < g.W; ++s) {
    const int src = source_at(ctx->rank, s, g.W);
    if (s > 0) {
      gin_wait_kernel<<<1, 32, 0, main>>>(ctx->devcomm, s);
      if ((rc = launch_ok())) return rc;
    }
    const void* kv = s == 0 ? ctx->buffers[BUF_KV].ptr : (const void*)slot(ctx, g, src);
    if ((rc = attend(ctx, g, src, 0, g.Sr, kv, s == 0, cuco_attn_merge_f32, main))) return rc;
  }
  return finish(ctx, g, main);
}

}  // namespace cuco_cp
"""


def render_gin(point: Directives) -> str:
    """The EVOLVE block of a GIN point (split_put_wait, signal, whole blocks)."""
    if point.placement != "split_put_wait" or point.sync_scope != "signal":
        raise ValueError(f"the GIN template covers split_put_wait/signal only, not {point.label()}")
    head = ENQUEUE_HEAD.lstrip("\n").replace("chunking(g).nchunks", "1")
    return fill(GIN_BLOCK, {"LABEL": point.label(), "ISSUER": ISSUER_TYPES[point.issuer],
                            "ISSUER_NAME": point.issuer, "ENQUEUE_HEAD": head}, what=f"gin block {point.label()}")
