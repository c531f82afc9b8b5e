"""LSA block text for placement=fused: one persistent CUTLASS GEMM over all M rows that follows row arrival
(FUSED_GEMM, shared with the copy-engine version in ce_block.py, where copy engines move the chunks).

The side stream copies the local block into A_full by copy engine in doubling pieces, then the pull kernel
(shared with stream_overlap) runs there on a few CTAs; each raises the flags of the chunks it landed. The main
stream launches `cuco_ag_gemm_persistent` once, on the other SMs: local row tiles first (each waits for its
piece), and a remote row tile's TMA loads only after its chunk's flag is up (the
producer warp waits; no stream wait, no second wave-quantised launch). chunk_bytes=whole is one flag per peer.
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.kit.template import fill
from cuco.workloads.gemm_allgather.common_block import barrier_launch
from cuco.workloads.gemm_allgather.lsa_blocks import PULL_KERNEL, pull_snippets, side_barriers

#: The persistent GEMM of the fused placement, shared by the pull kernel's and the copy engines' versions.
FUSED_GEMM = r"""// The persistent GEMM's runtime choices (no recompilation: cuco/compute/gemm_allgather.h).
constexpr int kGemmConfig = CUCO_AG_PINGPONG_128x128;  // best on 5 of 6 shapes on one H200 (gemm_persistent_1gpu)

// Raster swizzle: 4 was best or within 1% of best on all six bench shapes on one H200 (8 cost up to 28%, at
// 16384x8192x3584); smaller where its band (swizzle x 256 rows) would not fit in the local rows, so that
// local-first order really starts on local rows only.
static int local_swizzle(const Geo& g) {
  int s = 4;
  while (s > 1 && (int64_t)s * 256 > g.Mr) s /= 2;
  return s;
}

// The local block into its rows of A_full on the side stream by copy engine, in doubling pieces (1, 1, 2, 4, ...
// chunks), each piece raising chunk[me][c] of the chunks it covers: the GEMM's first local tiles wait for one
// chunk's copy, not for the whole block's (~Mr*K*2 bytes, 0.09 ms at 16384x8192 over two ranks, on the critical
// path when the main stream copied it before the GEMM).
static int local_pieces(cuco_ctx* ctx, State* st, const Geo& g, const Flags& f, cudaStream_t side) {
  const size_t row_bytes = (size_t)g.K * 2;
  const char* a_local = (const char*)ctx->buffers[BUF_A_LOCAL].ptr;
  char* mine = (char*)ctx->buffers[BUF_A_FULL].ptr + (size_t)g.me * g.Mr * row_bytes;
  int c0 = 0, c1 = 0, rc = 0;
  for (int i = 0; cuco::kit::doubling_piece(g.nchunks, i, &c0, &c1); ++i) {
    const int64_t r0 = c0 * g.chunk_rows, r1 = c1 * g.chunk_rows < g.Mr ? c1 * g.chunk_rows : g.Mr;
    if (cudaMemcpyAsync(mine + r0 * row_bytes, a_local + r0 * row_bytes, (r1 - r0) * row_bytes,
                        cudaMemcpyDeviceToDevice, side) != cudaSuccess)
      return 64;
    if ((rc = cuco::kit::stream_set_epochs(st, side, &f.chunk[g.me * g.nchunks + c0], c1 - c0))) return rc;
  }
  return 0;
}

// ONE persistent GEMM over A_full on `sm_count` SMs (even: clusters of 2 CTAs), local row tiles first; a tile's TMA
// loads wait for its chunk[p][c] flag to reach this launch's epoch: remote tiles always (W > 1), local ones too when
// `local_in_flight` (local_pieces copies them); otherwise the main stream copies the local block first (W = 1).
static int persistent_gemm(cuco_ctx* ctx, State* st, const Geo& g, const Flags& f, int sm_count, cudaStream_t main,
                           bool local_in_flight) {
  char* a_full = (char*)ctx->buffers[BUF_A_FULL].ptr;
  if (!local_in_flight && cudaMemcpyAsync(a_full + (size_t)g.me * g.Mr * g.K * 2, ctx->buffers[BUF_A_LOCAL].ptr,
                                          (size_t)g.Mr * g.K * 2, cudaMemcpyDeviceToDevice, main) != cudaSuccess)
    return 64;
  cuco_ag_gemm_args a = {};
  a.A = a_full;
  a.B = ctx->buffers[BUF_B].ptr;
  a.C = ctx->buffers[BUF_C].ptr;
  a.M = g.M;
  a.N = g.N;
  a.K = g.K;
  a.lda = g.K;
  a.ldb = g.N;
  a.ldc = g.N;
  a.local_row_begin = (int64_t)g.me * g.Mr;  // where local-first order starts
  a.local_row_end = local_in_flight ? a.local_row_begin : (int64_t)(g.me + 1) * g.Mr;  // rows that never wait
  a.order = CUCO_AG_ORDER_LOCAL_FIRST;
  a.flags = g.W > 1 || local_in_flight ? f.chunk : nullptr;  // chunk[p][c], raised as each chunk lands
  a.epoch_at = st->epoch_at;  // the GEMM reads this launch's epoch on the device (graph-safe)
  a.rows_per_rank = g.Mr;
  a.chunk_rows = g.chunk_rows;
  a.chunks_per_rank = g.nchunks;
  a.sm_count = sm_count & ~1;
  a.config = kGemmConfig;
  a.swizzle = local_swizzle(g);
  const int rc = cuco_ag_gemm_persistent(&a, main);
  return rc ? 2000 + rc : 0;
}

"""

FUSED = PULL_KERNEL + FUSED_GEMM + r"""// placement=fused: pull kernel (side stream, comm_ctas() SMs) | local block into A_full, then ONE persistent
// GEMM over A_full on the remaining SMs, whose producer warp waits for each remote tile's chunk flag.
static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  const Flags f = flags_of(ctx, g);
  const int ncomm = g.W > 1 ? comm_ctas(g) : 0;  // at W = 1 nothing is pulled: the GEMM gets every SM
  cudaStream_t main = ctx->stream, side = ctx->side_stream;
  char* a_full = (char*)ctx->buffers[BUF_A_FULL].ptr;
  int rc = 0;
  if (ncomm > 0) {
    if ((rc = local_pieces(ctx, st, g, f, side))) return rc;  // local rows first: the GEMM starts on them
@PRE@    // Launched before the GEMM, on SMs the GEMM leaves free: the flags it raises never wait on the GEMM.
    pull_kernel<<<ncomm, kCommThreads, 0, side>>>(ctx->devcomm, ctx->buffers[BUF_A_LOCAL].window,
                                                  ctx->symmetric_workspace.window, (int4*)a_full, f, g, st->epoch_at);
    if ((rc = launch_ok())) return rc;
@POST@  }
  return persistent_gemm(ctx, st, g, f, ctx->sm_count - ncomm, main, ncomm > 0);
}
"""


def render_fused(point: Directives) -> str:
    """The fused placement's block: pull kernel with the point's sync snippets, then the persistent GEMM."""
    subs = pull_snippets(point)
    subs.update({"BARRIERS": side_barriers(point), "PRE": barrier_launch(point, "side", indent="    "),
                 "POST": barrier_launch(point, "side", indent="    ")})
    return fill(FUSED, subs, what="fused block")
