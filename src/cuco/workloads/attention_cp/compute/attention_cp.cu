// Ring-attention compute library (attention_cp.h): block attention on tensor cores through the kit's CUTLASS
// Hopper FMHA, and the log-sum-exp merge (an elementwise kernel).
#include <math.h>

#include <cuda_bf16.h>

#include "attention_block.cuh"
#include "attention_cp.h"

namespace {

// O's type per call (RegisterOut): the ring's steps write fp32 partials and merge them, the single step at W = 1
// writes bf16 O with no rounding pass. The ring's steps share the GPU with its communication, so they take the
// cooperative scheduler (a CTA held back delays only its own tile). The single step at W = 1 has the GPU to itself
// and takes the persistent one where it is faster (attention_block.cuh, attention_cp_alone.cu). alone: nothing else
// runs on the GPU beside this call (the single step at W = 1).
template <int D>
int block(cuco::kit::fmha::Problem& p, int64_t lse_ld, int causal, bool alone, cudaStream_t s) {
  if (alone && cuco_attn_impl::persistent_alone(D)) return cuco_attn_impl::block_alone(p, D, lse_ld, causal, s);
  return cuco_attn_impl::block<D, cuco::kit::fmha::Cooperative>(p, lse_ld, causal, s);
}

// o_bf16: the single step at W = 1, the only caller of the bf16 output, which has the GPU to itself
int block_any(const void* q, const void* k, const void* v, void* o, bool o_bf16, float* lse, int64_t q_rows,
              int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld, int causal,
              cudaStream_t stream) {
  const bool alone = o_bf16;
  if (q_rows <= 0) return 0;
  cuco::kit::fmha::Problem p = cuco_attn_impl::problem(q, k, v, o, o_bf16, lse, q_rows, k_rows, heads_q, heads_kv);
  switch (head_dim) {
    case 32: return block<32>(p, lse_ld, causal, alone, stream);
    case 64: return block<64>(p, lse_ld, causal, alone, stream);
    case 128: return block<128>(p, lse_ld, causal, alone, stream);
    default: return 9;
  }
}

// One group of D/8 threads per (row, head): each thread merges 8 channels. The group reads both LSEs before any
// of its threads writes the new one (__syncwarp: a group never spans two warps). A thread's channels, weights and
// new LSE; false for the threads past the end.
struct MergeSlot {
  int64_t off, lse_at;  // first of its 8 channels in O; its (head, row) in the LSE
  float wa, wb, lse;    // weights of the running and the partial output, and the merged LSE
  bool writes_lse;      // the group's first thread
};
template <int D>
__device__ __forceinline__ bool merge_slot(const float* lse, const float* lb, int64_t rows, int heads, int64_t lse_ld,
                                           MergeSlot* m) {
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
  if (!live) return false;
  const float mx = fmaxf(la, lbk);  // lbk is finite (every piece has a key per row): so is mx, even at la = -inf
  const float ea = __expf(la - mx), eb = __expf(lbk - mx);
  const float inv = 1.f / (ea + eb);
  *m = MergeSlot{(row * heads + h) * D + v * 8, h * lse_ld + row, ea * inv, eb * inv, mx + __logf(ea + eb), v == 0};
  return true;
}

// The merge: an fp32 partial into an fp32 running output, 8 channels per thread as two float4 each (no rounding:
// the finish rounds once).
template <int D>
__global__ void merge_f32_kernel(float* o, float* lse, const float* ob, const float* lb, int64_t rows, int heads,
                                 int64_t lse_ld) {
  MergeSlot m;
  if (!merge_slot<D>(lse, lb, rows, heads, lse_ld, &m)) return;
  float4* pa = reinterpret_cast<float4*>(o + m.off);
  const float4* pb = reinterpret_cast<const float4*>(ob + m.off);
  const float wa = m.wa, wb = m.wb;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float4 a = pa[i], b = pb[i];
    pa[i] = make_float4(a.x * wa + b.x * wb, a.y * wa + b.y * wb, a.z * wa + b.z * wb, a.w * wa + b.w * wb);
  }
  if (m.writes_lse) lse[m.lse_at] = m.lse;
}

__global__ void fill_kernel(float* p, float value, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = value;
}

// o[i] = bf16(o32[i]), 8 elements per thread.
__global__ void finish_f32_kernel(__nv_bfloat16* o, const float* o32, int64_t n8) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n8; i += (int64_t)gridDim.x * blockDim.x) {
    const float4 a = reinterpret_cast<const float4*>(o32)[2 * i], b = reinterpret_cast<const float4*>(o32)[2 * i + 1];
    uint4 out;
    __nv_bfloat162* po = reinterpret_cast<__nv_bfloat162*>(&out);
    po[0] = __floats2bfloat162_rn(a.x, a.y), po[1] = __floats2bfloat162_rn(a.z, a.w);
    po[2] = __floats2bfloat162_rn(b.x, b.y), po[3] = __floats2bfloat162_rn(b.z, b.w);
    reinterpret_cast<uint4*>(o)[i] = out;
  }
}

unsigned grid_for(int64_t n) { return (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096); }

template <int D>
int merge(float* o, float* lse, const float* ob, const float* lb, int64_t rows, int heads, int64_t lse_ld,
          cudaStream_t s) {
  const int64_t threads = rows * heads * (D / 8);
  const unsigned blocks = (unsigned)((threads + 255) / 256);
  merge_f32_kernel<D><<<blocks, 256, 0, s>>>(o, lse, ob, lb, rows, heads, lse_ld);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

}  // namespace

extern "C" int cuco_attn_block_f32(const void* q, const void* k, const void* v, void* o32, float* lse, int64_t q_rows,
                                   int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld, int causal,
                                   cudaStream_t stream) {
  return block_any(q, k, v, o32, false, lse, q_rows, k_rows, heads_q, heads_kv, head_dim, lse_ld, causal, stream);
}

extern "C" int cuco_attn_block_bf16(const void* q, const void* k, const void* v, void* o, float* lse, int64_t q_rows,
                                    int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld,
                                    int causal, cudaStream_t stream) {
  return block_any(q, k, v, o, true, lse, q_rows, k_rows, heads_q, heads_kv, head_dim, lse_ld, causal, stream);
}

extern "C" int cuco_attn_merge_f32(void* o32, float* lse, const void* o_blk, const float* lse_blk, int64_t rows,
                                   int heads, int head_dim, int64_t lse_ld, cudaStream_t stream) {
  if (rows <= 0) return 0;
  float* o = (float*)o32;
  const float* ob = (const float*)o_blk;
  switch (head_dim) {
    case 32: return merge<32>(o, lse, ob, lse_blk, rows, heads, lse_ld, stream);
    case 64: return merge<64>(o, lse, ob, lse_blk, rows, heads, lse_ld, stream);
    case 128: return merge<128>(o, lse, ob, lse_blk, rows, heads, lse_ld, stream);
    default: return 9;
  }
}

extern "C" int cuco_attn_start_f32(void* o32, float* lse, int64_t rows, int heads, int head_dim,
                                   cudaStream_t stream) {
  if (rows <= 0) return 0;
  if (cudaMemsetAsync(o32, 0, (size_t)(rows * heads * head_dim) * sizeof(float), stream) != cudaSuccess) return 5;
  const int64_t n = rows * heads;
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(lse, -INFINITY, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

extern "C" int cuco_attn_finish_f32(void* o, const void* o32, int64_t rows, int heads, int head_dim,
                                    cudaStream_t stream) {
  if (rows <= 0) return 0;
  if (head_dim % 8) return 9;
  const int64_t n8 = rows * heads * head_dim / 8;
  finish_f32_kernel<<<grid_for(n8), 256, 0, stream>>>((__nv_bfloat16*)o, (const float*)o32, n8);
  return cudaGetLastError() == cudaSuccess ? 0 : 5;
}

extern "C" const char* cuco_attn_config(void) {
  return "CUTLASS 88_hopper_fmha forward, warp-specialised cooperative, tiles 128x128xD (d 32 / 64 / 128), bf16 in, "
         "fp32 out (bf16 out for the single step at W = 1, persistent at d 32 / 64), fp32 accumulate, LSE out; "
         "merge: elementwise, fp32 partials into an fp32 running output, one rounding to bf16 at the end";
}
