// Ring-attention compute library (attention_cp.h): block attention on tensor cores through the kit's CUTLASS
// Hopper FMHA, and the log-sum-exp merge (an elementwise kernel).
#include <math.h>

#include <cuda_bf16.h>

#include "attention_cp.h"
#include "cuco/kit/compute/fmha_hopper.cuh"

namespace {

template <int D>
int block(cuco::kit::fmha::Problem& p, int64_t lse_ld, int causal, cudaStream_t s) {
  cuco::kit::fmha::set_dense_strides(p, D);
  p.lse_head_stride = lse_ld;
  p.lse_batch_stride = lse_ld * p.heads_q;
  return causal ? cuco::kit::fmha::forward<D, true>(p, s) : cuco::kit::fmha::forward<D, false>(p, s);
}

// One group of D/8 threads per (row, head): each thread merges 8 channels. The group reads both LSEs before any
// of its threads writes the new one (__syncwarp: a group never spans two warps).
template <int D>
__global__ void merge_kernel(__nv_bfloat16* o, float* lse, const __nv_bfloat16* ob, const float* lb, int64_t rows,
                             int heads, int64_t lse_ld) {
  constexpr int kVec = D / 8;
  const int64_t pairs = rows * heads;
  const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const bool live = t < pairs * kVec;
  const int64_t pair = live ? t / kVec : 0;
  const int v = (int)(t % kVec);
  const int64_t row = pair / heads;
  const int h = (int)(pair % heads);
  float la = 0.f, lbk = 0.f;
  if (live) la = lse[h * lse_ld + row], lbk = lb[h * lse_ld + row];
  __syncwarp();
  if (!live) return;
  const float m = fmaxf(la, lbk);
  const float ea = __expf(la - m), eb = __expf(lbk - m);
  const float inv = 1.f / (ea + eb);
  const float wa = ea * inv, wb = eb * inv;
  const int64_t off = (row * heads + h) * D + v * 8;
  uint4 a = *reinterpret_cast<const uint4*>(o + off);
  const uint4 b = *reinterpret_cast<const uint4*>(ob + off);
  __nv_bfloat162* pa = reinterpret_cast<__nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
    pa[i] = __floats2bfloat162_rn(fa.x * wa + fb.x * wb, fa.y * wa + fb.y * wb);
  }
  *reinterpret_cast<uint4*>(o + off) = a;
  if (v == 0) lse[h * lse_ld + row] = m + __logf(ea + eb);
}

template <int D>
int merge(void* o, float* lse, const void* ob, const float* lb, int64_t rows, int heads, int64_t lse_ld,
          cudaStream_t s) {
  const int64_t threads = rows * heads * (D / 8);
  const int64_t blocks = (threads + 255) / 256;
  merge_kernel<D><<<(unsigned)blocks, 256, 0, s>>>((__nv_bfloat16*)o, lse, (const __nv_bfloat16*)ob, lb, rows,
                                                   heads, lse_ld);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

}  // namespace

extern "C" int cuco_attn_block(const void* q, const void* k, const void* v, void* o, float* lse, int64_t q_rows,
                               int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld, int causal,
                               cudaStream_t stream) {
  if (q_rows <= 0) return 0;
  cuco::kit::fmha::Problem p{};
  p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
  p.batch = 1, p.heads_q = heads_q, p.heads_kv = heads_kv;
  p.seq_q = (int)q_rows, p.seq_k = (int)k_rows;
  switch (head_dim) {
    case 32: return block<32>(p, lse_ld, causal, stream);
    case 64: return block<64>(p, lse_ld, causal, stream);
    case 128: return block<128>(p, lse_ld, causal, stream);
    default: return 9;
  }
}

extern "C" int cuco_attn_merge(void* o, float* lse, const void* o_blk, const float* lse_blk, int64_t rows, int heads,
                               int head_dim, int64_t lse_ld, cudaStream_t stream) {
  if (rows <= 0) return 0;
  switch (head_dim) {
    case 32: return merge<32>(o, lse, o_blk, lse_blk, rows, heads, lse_ld, stream);
    case 64: return merge<64>(o, lse, o_blk, lse_blk, rows, heads, lse_ld, stream);
    case 128: return merge<128>(o, lse, o_blk, lse_blk, rows, heads, lse_ld, stream);
    default: return 9;
  }
}

extern "C" const char* cuco_attn_config(void) {
  return "CUTLASS 88_hopper_fmha forward, warp-specialised cooperative, tiles 128x64x32 / 128x64x64 / 128x128x128 "
         "(d 32 / 64 / 128), bf16 in/out, fp32 accumulate, LSE out; merge: elementwise bf16 with fp32 LSE";
}
