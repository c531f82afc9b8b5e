"""NVSHMEM block text (backend=nvshmem): put-with-signal into every PE's copy of A_full, per-chunk signal waits
before the GEMM of the landed rows (placement=split_put_wait, sync_scope=signal; issuer warp or cta)."""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.kit.template import fill
from cuco.workloads.gemm_allgather.block_parts import block_needs, remote_chunk_gemms

#: Included before the block's prologue: it makes the candidate an NVSHMEM program (compiled -rdc=true).
INCLUDE = '#include "cuco/kit/nvshmem.cuh"  // backend=nvshmem\n'

NVSHMEM = r"""
// backend=nvshmem: every rank puts its block, chunk by chunk, into every PE's copy of A_full in the NVSHMEM
// workspace -- its own copy included, so the GEMM reads one A and the arrival path runs at W = 1 too -- with
// put-with-signal (sig[me][c] := epoch on the receiver). Before writing into PE q it waits for q's ready[q] (q's
// previous GEMM is done: q's put kernel runs after it). The main stream waits per chunk
// (nvshmem_signal_wait_until in a one-thread kernel), then multiplies the landed rows.
constexpr int kPutCtas = @PUT_CTAS@;

// NVSHMEM workspace: A_full (M x K bf16, 256-byte padded) | sig[W][nchunks] | ready[W]  (uint64 signals)
__host__ __device__ inline size_t nv_a_bytes(const Geo& g) { return ((size_t)g.M * g.K * 2 + 255) / 256 * 256; }
__host__ __device__ inline uint64_t* nv_sig(void* ws, const Geo& g) { return (uint64_t*)((char*)ws + nv_a_bytes(g)); }
__host__ __device__ inline uint64_t* nv_ready(void* ws, const Geo& g) { return nv_sig(ws, g) + (size_t)g.W * g.nchunks; }

__global__ void __launch_bounds__(kCommThreads) nv_put_kernel(void* ws, const char* a_local, Geo g,
                                                              const uint32_t* epoch_at) {
  const uint64_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  uint64_t* sig = nv_sig(ws, g);
  uint64_t* ready = nv_ready(ws, g);
  // My A_full may be written from now on (my previous GEMM is done): tell every PE, me included.
  if (blockIdx.x == 0 && (int)threadIdx.x < g.W)
    nvshmemx_signal_op(&ready[g.me], epoch, NVSHMEM_SIGNAL_SET, (int)threadIdx.x);
  const size_t row_bytes = (size_t)g.K * 2;
  for (int s = 0; s < g.W; ++s) {
    const int q = (g.me + s) % g.W;  // destination PE, this one first
    if (threadIdx.x == 0) nvshmem_signal_wait_until(&ready[q], NVSHMEM_CMP_GE, epoch);
    __syncthreads();
    @PUT_LOOP@
  }
}

// The wait half: holds the GEMM stream until chunk c of rank p has landed here.
__global__ void nv_wait_kernel(uint64_t* sig, const uint32_t* epoch_at) {
  if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, (uint64_t)cuco::kit::load_epoch(epoch_at));
}

""" + block_needs("nvshmem_bytes = nv_a_bytes(g) + 8 * ((size_t)g.W * g.nchunks + g.W)") + r"""
// placement=split_put_wait, backend=nvshmem: put kernel (side stream) | per landed chunk, this rank's first: wait
// kernel, GEMM of its rows from the NVSHMEM copy of A_full.
static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  cudaStream_t main = ctx->stream, side = ctx->side_stream;
  void* ws = ctx->nvshmem_workspace;
  const char* a_full = (const char*)ws;
  char* c_out = (char*)ctx->buffers[BUF_C].ptr;
  const uint32_t* epoch_at = st->epoch_at;  // the kernels read this launch's epoch there
  int rc = 0;
  nv_put_kernel<<<kPutCtas, kCommThreads, 0, side>>>(ws, (const char*)ctx->buffers[BUF_A_LOCAL].ptr, g, epoch_at);
  if ((rc = launch_ok())) return rc;
""" + remote_chunk_gemms(
    "      nv_wait_kernel<<<1, 32, 0, main>>>(nv_sig(ws, g) + (size_t)p * g.nchunks + c, epoch_at);\n"
    "      if ((rc = launch_ok())) return rc;\n", first=0)

_CTA_LOOP = """for (int c = blockIdx.x; c < g.nchunks; c += gridDim.x) {  // issuer=cta: a CTA puts a chunk
      const int64_t r0 = (int64_t)c * g.chunk_rows;
      const int64_t rows = g.Mr - r0 < g.chunk_rows ? g.Mr - r0 : g.chunk_rows;
      nvshmemx_putmem_signal_block((char*)ws + (size_t)(g.me * g.Mr + r0) * row_bytes, a_local + r0 * row_bytes,
                                   rows * row_bytes, &sig[g.me * g.nchunks + c], epoch, NVSHMEM_SIGNAL_SET, q);
    }"""

_WARP_LOOP = """const int warps = kCommThreads / 32, w = blockIdx.x * warps + threadIdx.x / 32;
    for (int c = w; c < g.nchunks; c += gridDim.x * warps) {  // issuer=warp: a warp puts a chunk
      const int64_t r0 = (int64_t)c * g.chunk_rows;
      const int64_t rows = g.Mr - r0 < g.chunk_rows ? g.Mr - r0 : g.chunk_rows;
      nvshmemx_putmem_signal_warp((char*)ws + (size_t)(g.me * g.Mr + r0) * row_bytes, a_local + r0 * row_bytes,
                                  rows * row_bytes, &sig[g.me * g.nchunks + c], epoch, NVSHMEM_SIGNAL_SET, q);
    }"""


def render_nvshmem(point: Directives) -> str:
    """The NVSHMEM block for `point` (split_put_wait / signal; issuer warp or cta)."""
    if point.issuer not in ("warp", "cta"):
        raise ValueError(f"render_nvshmem does not handle issuer={point.issuer}")
    loop = _CTA_LOOP if point.issuer == "cta" else _WARP_LOOP
    return fill(NVSHMEM, {"PUT_LOOP": loop, "PUT_CTAS": "kMaxCommCtas"}, what="nvshmem block")
