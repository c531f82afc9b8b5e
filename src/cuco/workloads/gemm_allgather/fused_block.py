"""LSA block text for placement=fused: one persistent tensor-core (WMMA) GEMM kernel that reads remote rows itself.

chunk_bytes=whole: GEMM CTAs load remote A tiles straight from the peer's A_local through LSA pointers.
chunked: the first kFusedCommCtas CTAs pull chunks into A_full and raise per-chunk flags; GEMM CTAs working on
remote rows wait for their chunk's flag. Local rows are multiplied first in either case.
"""

from __future__ import annotations

from cuco.design_space import WHOLE, Directives
from cuco.kit.template import fill
from cuco.workloads.gemm_allgather.common_block import BLOCK_SESSION_CLOSE, BLOCK_SESSION_OPEN, barrier_launch

FUSED = r"""
constexpr int BM = 128, BN = 128, BK = 32;  // CTA tile; 8 warps as 4 x 2, each 32 x 64
constexpr int kGemmThreads = 256;
constexpr int LDA_S = BK + 8, LDB_S = BN + 8;  // padded shared-memory rows (bank conflicts)
constexpr int kFusedCommCtas = @COMM_CTAS@;     // CTAs that pull chunks (0: GEMM CTAs read peers directly)

struct __align__(128) Smem {
  __nv_bfloat16 a[2][BM][LDA_S];
  __nv_bfloat16 b[2][BK][LDB_S];
  float scratch[kGemmThreads / 32][16 * 16];
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// One BM x BN tile of C: rows a_rows[0..BM) (row-major, K wide; local or a peer's memory), columns n0..n0+BN.
__device__ void gemm_tile(Smem& sm, const __nv_bfloat16* a_rows, const __nv_bfloat16* B, __nv_bfloat16* c_rows,
                          int64_t K, int64_t N, int64_t n0) {
  using namespace nvcuda;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 2, wn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  auto load = [&](int stage, int64_t k0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * kGemmThreads;  // 512 16-byte pieces of A and of B per stage
      const int ar = idx / 4, ac = (idx % 4) * 8;
      cp_async16(&sm.a[stage][ar][ac], a_rows + ar * K + k0 + ac);
      const int br = idx / 16, bc = (idx % 16) * 8;
      cp_async16(&sm.b[stage][br][bc], B + (k0 + br) * N + n0 + bc);
    }
    cp_async_commit();
  };
  const int nk = (int)(K / BK);
  load(0, 0);
  for (int kt = 0; kt < nk; ++kt) {
    if (kt + 1 < nk) {
      load((kt + 1) & 1, (int64_t)(kt + 1) * BK);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int s = kt & 1;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &sm.a[s][wm * 32 + i * 16][kk], LDA_S);
#pragma unroll
      for (int j = 0; j < 4; ++j) wmma::load_matrix_sync(fb[j], &sm.b[s][kk][wn * 64 + j * 16], LDB_S);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  float* scr = sm.scratch[warp];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wmma::store_matrix_sync(scr, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int r = wm * 32 + i * 16 + e / 16, c = wn * 64 + j * 16 + e % 16;
        c_rows[r * N + n0 + c] = __float2bfloat16(scr[e]);
      }
      __syncwarp();
    }
}

__global__ void __launch_bounds__(kGemmThreads)
    fused_kernel(ncclDevComm dc, ncclWindow_t win_a, ncclWindow_t win_sym, const __nv_bfloat16* a_local,
                 __nv_bfloat16* a_full, const __nv_bfloat16* B, __nv_bfloat16* C, Flags f, Geo g, uint32_t epoch) {
  __shared__ Smem sm;
  @ENTRY@
  if ((int)blockIdx.x < kFusedCommCtas) {
    // Communication CTAs: pull every peer's block chunk by chunk; flag each chunk when all of them wrote it.
    const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
    const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(kFusedCommCtas);
    for (int s = 1; s < g.W; ++s) {
      const int p = (g.me + s) % g.W;
      @WAIT_READY@
      const int4* src = cuco::lsa::peer_ptr<const int4>(dc, win_a, 0, g.me, p);
      for (int c = 0; c < g.nchunks; ++c) {
        const int64_t r0 = c * g.chunk_rows;
        const int64_t rows = g.Mr - r0 < g.chunk_rows ? g.Mr - r0 : g.chunk_rows;
        cuco::lsa::copy16<kUnroll>(Issuer(), (int4*)a_full + (p * g.Mr + r0) * g.row16, src + r0 * g.row16,
                                   rows * g.row16, group, ngroups);
        const int fi = p * g.nchunks + c;
        if (cuco::lsa::cta_arrive_last(&f.count[fi], kFusedCommCtas)) cuco::lsa::store_release_sys(&f.chunk[fi], epoch);
      }
    }
  } else {
    // GEMM CTAs: persistent over tiles; local rows first, then peers in pull order.
    const int gid = blockIdx.x - kFusedCommCtas, ngemm = gridDim.x - kFusedCommCtas;
    const int64_t ntn = g.N / BN, per_rank = (g.Mr / BM) * ntn, ntiles = g.W * per_rank;
    int ready_peer = g.me;
    for (int64_t t = gid; t < ntiles; t += ngemm) {
      const int p = (int)((g.me + t / per_rank) % g.W);
      const int64_t r0 = ((t % per_rank) / ntn) * BM, ct = t % ntn;
      const __nv_bfloat16* a_rows = a_local + r0 * g.K;
      if (p != g.me) {
        @REMOTE_A@
      }
      gemm_tile(sm, a_rows, B, C + (p * g.Mr + r0) * g.N, g.K, g.N, ct * BN);
    }
    (void)ready_peer;
  }
  @EXIT@
}

static Needs block_needs(const cuco_ctx* ctx) {
  Geo g = geo_of(ctx);
  Needs n;
  n.flag_bytes = 4 * local_words(g);
  n.sym_bytes = 4 * sym_words(g) + 4096;
  n.lsa_barriers = @BARRIERS@;
  return n;
}

// placement=fused: one kernel, one CTA per SM (all co-resident, so in-kernel waits cannot deadlock).
static int enqueue(cuco_ctx* ctx, State* st) {
  (void)st;
  const Geo g = geo_of(ctx);
  const Flags f = flags_of(ctx, g);
  cudaStream_t main = ctx->stream;
  int rc = 0;
@PRE@  fused_kernel<<<ctx->sm_count, kGemmThreads, 0, main>>>(
      ctx->devcomm, ctx->buffers[BUF_A_LOCAL].window, ctx->symmetric_workspace.window,
      (const __nv_bfloat16*)ctx->buffers[BUF_A_LOCAL].ptr, (__nv_bfloat16*)ctx->buffers[BUF_A_FULL].ptr,
      (const __nv_bfloat16*)ctx->buffers[BUF_B].ptr, (__nv_bfloat16*)ctx->buffers[BUF_C].ptr, f, g, st->epoch);
  if ((rc = launch_ok())) return rc;
@POST@  return 0;
}
"""

_DIRECT_A = """// chunk_bytes=whole: read the peer's rows in place through its LSA pointer.
        @WAIT_READY_GEMM@
        a_rows = cuco::lsa::peer_ptr<const __nv_bfloat16>(dc, win_a, 0, g.me, p) + r0 * g.K;"""

_CHUNK_A = """// chunked: wait until the communication CTAs landed this tile's chunk in A_full.
        cuco::lsa::cta_wait_epoch(&f.chunk[p * g.nchunks + (int)(r0 / g.chunk_rows)], epoch);
        a_rows = a_full + (p * g.Mr + r0) * g.K;"""

_SIGNAL_EXIT = """// sync_scope=signal: the last CTA to finish tells peers it stopped reading them, then waits for theirs.
  if (cuco::lsa::cta_arrive_last(&f.misc[0], gridDim.x)) {
    for (int q = 0; q < g.W; ++q)
      if (q != g.me) publish_done(dc, win_sym, g, q, epoch);
    for (int q = 0; q < g.W; ++q)
      if (q != g.me) cuco::lsa::wait_epoch(&f.sym[sym_done(g, q)], epoch);
  }"""


def render_fused(point: Directives) -> str:
    scope = point.sync_scope
    chunked = point.chunk_bytes != WHOLE
    remote = _CHUNK_A if chunked else _DIRECT_A
    wait_ready = "cuco::lsa::cta_wait_epoch(&f.sym[SYM_READY + p], epoch);  // p's input is ready"
    if scope == "signal":
        entry = "publish_ready(dc, win_sym, g, epoch);  // sync_scope=signal: my input is ready"
        exit_ = _SIGNAL_EXIT
        gemm_wait = ("if (p != ready_peer) {  // first tile of peer p: its input must be ready\n"
                     f"          {wait_ready}\n          ready_peer = p;\n        }}")
        comm_wait = wait_ready
    elif scope == "block":
        entry, exit_, gemm_wait, comm_wait = BLOCK_SESSION_OPEN, BLOCK_SESSION_CLOSE, "", ""
    else:
        entry, exit_, gemm_wait, comm_wait = f"// sync_scope={scope}: barrier kernels run before and after", "", "", ""
    subs = {
        "REMOTE_A": remote if chunked else fill(remote, {"WAIT_READY_GEMM": gemm_wait}),
        "WAIT_READY": comm_wait,
        "ENTRY": entry,
        "EXIT": exit_,
        "COMM_CTAS": "16" if chunked else "0",
        "BARRIERS": "ctx->sm_count" if scope == "block" else ("0" if scope == "signal" else "1"),
        "PRE": barrier_launch(point, "main"),
        "POST": barrier_launch(point, "main"),
    }
    return fill(FUSED, subs, what="fused block")
