// Block copies between token rows and paged KV caches (vLLM's reshape_and_cache and its inverse, and page-to-page
// transfers), with a caller-chosen issuer group and CTA count: the same kernel serves the prefill's cache write
// (all SMs) and a transfer beside the layer compute (a few CTAs, possibly into a peer's pages through LSA).
#include <cuda_runtime.h>

#include "kv_compute.h"

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// Element offset of row `t` (0..15) of block b, plane kv, on one side.
__device__ __forceinline__ int64_t elem(const cuco_kvt_side& s, int64_t D, int kv, int64_t b, int t) {
  if (s.rows) return (b * CUCO_KVT_BLOCK + t) * s.row_ld + kv * D;
  const int64_t page = s.table ? s.table[b] : b;
  return ((kv * s.pool + page) * CUCO_KVT_BLOCK + t) * D;
}

__device__ __forceinline__ int4* base(const cuco_kvt_side& s) {
  return reinterpret_cast<int4*>(s.rows ? s.rows : s.pages);
}

// One job = (plane, block): 16 rows of D bf16. kGroup threads per job (0: the whole CTA); each thread keeps kUnroll
// 16-byte loads in flight, which is what hides NVLink latency when a side is remote.
template <int kGroup>
__global__ void __launch_bounds__(kThreads) copy_blocks_kernel(cuco_kvt_side src, cuco_kvt_side dst, int64_t D,
                                                               int64_t b0, int64_t b1) {
  const int lanes = kGroup ? kGroup : kThreads;
  const int per_cta = kThreads / lanes;
  const int lane = threadIdx.x % lanes;
  const int64_t group = (int64_t)blockIdx.x * per_cta + threadIdx.x / lanes;
  const int64_t ngroups = (int64_t)gridDim.x * per_cta;
  const int64_t words_row = D / 8, words = CUCO_KVT_BLOCK * words_row, jobs = 2 * (b1 - b0);
  for (int64_t j = group; j < jobs; j += ngroups) {
    const int kv = (int)(j & 1);
    const int64_t b = b0 + j / 2;
    for (int64_t w0 = 0; w0 < words; w0 += (int64_t)lanes * kUnroll) {
      int4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t w = w0 + u * lanes + lane;
        if (w < words)
          v[u] = __ldcg(base(src) + (elem(src, D, kv, b, (int)(w / words_row)) / 8 + w % words_row));
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t w = w0 + u * lanes + lane;
        if (w < words) base(dst)[elem(dst, D, kv, b, (int)(w / words_row)) / 8 + w % words_row] = v[u];
      }
    }
  }
}

}  // namespace

extern "C" int cuco_kvt_copy_blocks(cuco_kvt_side src, cuco_kvt_side dst, int64_t D, int64_t b0, int64_t b1,
                                    int group, int ctas, cudaStream_t stream) {
  if (D <= 0 || D % 8 || b0 < 0 || b1 < b0 || ctas < 1 || (!src.rows && !src.pages) || (!dst.rows && !dst.pages))
    return 1;
  if (b1 == b0) return 0;
  switch (group) {
    case 1: copy_blocks_kernel<1><<<ctas, kThreads, 0, stream>>>(src, dst, D, b0, b1); break;
    case 32: copy_blocks_kernel<32><<<ctas, kThreads, 0, stream>>>(src, dst, D, b0, b1); break;
    case 0: copy_blocks_kernel<0><<<ctas, kThreads, 0, stream>>>(src, dst, D, b0, b1); break;
    default: return 2;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
