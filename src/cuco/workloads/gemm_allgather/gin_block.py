"""GIN block text (NCCL GIN device API: put with signal), placement=split_put_wait, sync_scope=signal.

Compile-verified here; it runs only where GIN is available (an RDMA NIC; the harness reports 'unsupported'
otherwise). Signals count, they are never reset: each launch raises the expected value through the signal's
shadow (increaseSignalShadow + waitSignalMeetShadow), so no epoch arithmetic is needed.
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.workloads.gemm_allgather.block_parts import (
    CHUNK_ROWS,
    ISSUER_GROUPS,
    LOCAL_ROWS_GEMM,
    SPLIT_ENQUEUE_OPEN,
    block_needs,
)

GIN_SPLIT = r"""
// Signal 0: "my A_full may be written" handshake at the start of each launch. Signal 1 + c: chunk c landed
// (raised once by every peer for each launch).
constexpr int kSigClear = 0;

// Put this rank's rows into every peer's A_full: one put per (peer, chunk), handed round-robin to issuer groups.
__global__ void __launch_bounds__(kCommThreads)
    gin_put_kernel(ncclDevComm dc, ncclWindow_t win_local, ncclWindow_t win_full, Flags f, Geo g,
                   const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  ncclGin gin(dc, 0);
  const ncclTeam world = ncclTeamWorld(dc);
  if (blockIdx.x == 0 && threadIdx.x == 0) {  // sync_scope=signal: every peer finished its previous launch
    for (int q = 0; q < g.W; ++q)
      if (q != g.me) gin.signal(world, q, ncclGin_SignalInc{(ncclGinSignal_t)kSigClear});
    gin.increaseSignalShadow(kSigClear, g.W - 1);
    gin.waitSignalMeetShadow(ncclCoopThread(), kSigClear);
    cuco::lsa::store_release_sys(&f.misc[1], epoch);
  }
  cuco::lsa::cta_wait_epoch(&f.misc[1], epoch);
""" + ISSUER_GROUPS + r"""  size_t job = 0;
  for (int s = 1; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    for (int c = 0; c < g.nchunks; ++c, ++job) {
      if (job % ngroups != group) continue;
""" + CHUNK_ROWS + r"""      gin.put(world, p, win_full, (size_t)(g.me * g.Mr + r0) * g.K * 2, win_local, (size_t)r0 * g.K * 2,
              (size_t)rows * g.K * 2, ncclGin_SignalInc{(ncclGinSignal_t)(1 + c)}, ncclGin_None{}, Issuer());
    }
  }
  gin.flush(Issuer());  // our A_local may be refilled once the launch completes
}

// The wait half: chunk c has landed from every peer.
__global__ void gin_wait_kernel(ncclDevComm dc, int c, int W) {
  if (threadIdx.x == 0) {
    ncclGin gin(dc, 0);
    gin.increaseSignalShadow((ncclGinSignal_t)(1 + c), W - 1);
    gin.waitSignalMeetShadow(ncclCoopThread(), (ncclGinSignal_t)(1 + c));
  }
}

""" + block_needs("flag_bytes = 4 * local_words(g)", "sym_bytes = 0", "gin_signals = 1 + g.nchunks",
                  "gin_required = 1") + r"""
// placement=split_put_wait over GIN: put kernel (side stream) | local-rows GEMM | per chunk: wait kernel, GEMM.
""" + SPLIT_ENQUEUE_OPEN + r"""  gin_put_kernel<<<ncomm, kCommThreads, 0, side>>>(ctx->devcomm, ctx->buffers[BUF_A_LOCAL].window,
                                                  ctx->buffers[BUF_A_FULL].window, f, g, st->epoch_at);
  if ((rc = launch_ok())) return rc;
""" + LOCAL_ROWS_GEMM + r"""  for (int c = 0; c < g.nchunks; ++c) {
    gin_wait_kernel<<<1, 32, 0, main>>>(ctx->devcomm, c, g.W);
    if ((rc = launch_ok())) return rc;
    const int64_t rows = g.Mr - c * g.chunk_rows < g.chunk_rows ? g.Mr - c * g.chunk_rows : g.chunk_rows;
    for (int s = 1; s < g.W; ++s) {
      const int64_t r0 = ((g.me + s) % g.W) * g.Mr + c * g.chunk_rows;
      if ((rc = gemm_rows(st, ctx, a_full + (size_t)r0 * g.K * 2, c_out + (size_t)r0 * g.N * 2, rows, 0, main)))
        return rc;
    }
  }
  return 0;
}
"""


def render_gin(point: Directives) -> str:
    """The GIN block of `point` (split_put_wait with signals is the one GIN point); ValueError otherwise."""
    if point.placement != "split_put_wait" or point.sync_scope != "signal":
        raise ValueError(f"the GIN template covers split_put_wait/signal only, not {point.label()}")
    return GIN_SPLIT
