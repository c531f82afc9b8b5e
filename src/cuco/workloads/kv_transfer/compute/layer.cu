// One prefill layer on library kernels: cuBLASLt GEMMs (the kit's shared plans) and CUTLASS's Hopper FMHA (the
// kit's shared instantiation), behind the C interface of kv_compute.h.
#include <cuda_bf16.h>

#include <new>

#include "cuco/kit/compute/fmha_hopper.cuh"
#include "cuco/kit/compute/lt_gemm.cuh"
#include "kv_compute.h"

namespace {

constexpr int64_t H = CUCO_KVT_HIDDEN, F = CUCO_KVT_MLP, DH = CUCO_KVT_HEAD_DIM;
constexpr size_t kLtWorkspace = 32u << 20;

using cuco_lt::LtGemm;

}  // namespace

struct cuco_kvt {
  int64_t S = 0, D = 0, QW = 0, ld = 0, chunk = 0;
  int hq = 0, hkv = 0, sm = 0;
  cublasLtHandle_t lt = nullptr;
  LtGemm qkv, q, kv_chunk, kv_tail, o, gu, down;
  void* ws = nullptr;                     // cuBLASLt workspace
  __nv_bfloat16* qkv_buf[2] = {};
  __nv_bfloat16* act_buf[2] = {};
  __nv_bfloat16 *attn = nullptr, *h = nullptr, *gu_buf = nullptr, *a = nullptr;
  __nv_bfloat16* xn = nullptr;            // the normalised rows a projection reads (x, then h)
  float* lse = nullptr;
};

namespace {

// a = silu(gate) * up, 8 bf16 per thread per step; gu rows hold gate (F) then up (F).
__global__ void silu_mul_kernel(const __nv_bfloat16* __restrict__ gu, __nv_bfloat16* __restrict__ a, int64_t S) {
  const int64_t per_row = F / 8, n = S * per_row;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / per_row, c = (i % per_row) * 8;
    const int4 g4 = *reinterpret_cast<const int4*>(gu + r * 2 * F + c);
    const int4 u4 = *reinterpret_cast<const int4*>(gu + r * 2 * F + F + c);
    const __nv_bfloat16* g = reinterpret_cast<const __nv_bfloat16*>(&g4);
    const __nv_bfloat16* u = reinterpret_cast<const __nv_bfloat16*>(&u4);
    int4 o4;
    __nv_bfloat16* o = reinterpret_cast<__nv_bfloat16*>(&o4);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float x = __bfloat162float(g[k]);
      o[k] = __float2bfloat16(x / (1.0f + __expf(-x)) * __bfloat162float(u[k]));
    }
    *reinterpret_cast<int4*>(a + r * F + c) = o4;
  }
}

// y = bf16(x * rsqrt(mean(x^2) + eps)) per row of H: RMSNorm with unit scale (Llama's pre-norm as initialised),
// which keeps activations O(1) through any number of layers. One CTA of 256 threads per row, 16 bf16 each.
constexpr int kNormThreads = 256;
static_assert(H == kNormThreads * 16, "rmsnorm_kernel covers H with 256 threads x 16 values");
__global__ void __launch_bounds__(kNormThreads) rmsnorm_kernel(const __nv_bfloat16* __restrict__ x,
                                                               __nv_bfloat16* __restrict__ y) {
  const int64_t r = blockIdx.x;
  const int c = threadIdx.x * 16;
  int4 v[2] = {*reinterpret_cast<const int4*>(x + r * H + c), *reinterpret_cast<const int4*>(x + r * H + c + 8)};
  const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(v);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < 16; ++k) ss += __bfloat162float(e[k]) * __bfloat162float(e[k]);
#pragma unroll
  for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float warp_sum[kNormThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sum[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kNormThreads / 32; ++w) total += warp_sum[w];
  const float inv = rsqrtf(total / H + 1e-5f);
  int4 out[2];
  __nv_bfloat16* o = reinterpret_cast<__nv_bfloat16*>(out);
#pragma unroll
  for (int k = 0; k < 16; ++k) o[k] = __float2bfloat16(__bfloat162float(e[k]) * inv);
  *reinterpret_cast<int4*>(y + r * H + c) = out[0];
  *reinterpret_cast<int4*>(y + r * H + c + 8) = out[1];
}

// Rows [row0, row0 + rows) of x, normalised into the same rows of p->xn.
int norm_rows(cuco_kvt* p, const void* x, int64_t row0, int64_t rows, cudaStream_t s) {
  rmsnorm_kernel<<<(unsigned)rows, kNormThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x) + row0 * H,
                                                        p->xn + row0 * H);
  return cudaGetLastError() == cudaSuccess ? 0 : 15;
}

template <typename T>
int alloc(T** p, size_t elems) {
  return cudaMalloc(reinterpret_cast<void**>(p), elems * sizeof(T)) == cudaSuccess ? 0 : 2;
}

const __nv_bfloat16* wpart(const void* w, int64_t D, int which) {
  int64_t off[4], total = 0;
  cuco_kvt_weight_offsets(D, off, &total);
  return static_cast<const __nv_bfloat16*>(w) + off[which];
}

}  // namespace

extern "C" int cuco_kvt_query_heads(int64_t D) {
  if (D <= 0 || D % DH) return 0;
  const int hkv = (int)(D / DH);
  return hkv > CUCO_KVT_MAX_QHEADS ? 0 : CUCO_KVT_MAX_QHEADS / hkv * hkv;
}

extern "C" void cuco_kvt_weight_offsets(int64_t D, int64_t out[4], int64_t* total) {
  const int64_t qw = cuco_kvt_query_heads(D) * DH;
  out[0] = 0;
  out[1] = out[0] + H * (qw + 2 * D);
  out[2] = out[1] + qw * H;
  out[3] = out[2] + H * 2 * F;
  *total = out[3] + F * H;
}

extern "C" int cuco_kvt_create(cuco_kvt** out, int64_t S, int64_t D, int sm_count, int64_t kv_chunk_rows) {
  *out = nullptr;
  const int hq = cuco_kvt_query_heads(D);
  if (S <= 0 || S % 128 || !hq || kv_chunk_rows < 0 || kv_chunk_rows % CUCO_KVT_BLOCK) return 1;
  cuco_kvt* p = new (std::nothrow) cuco_kvt();
  if (!p) return 2;
  *out = p;
  p->S = S, p->D = D, p->hq = hq, p->hkv = (int)(D / DH), p->QW = hq * DH, p->ld = p->QW + 2 * D;
  p->chunk = kv_chunk_rows < S ? kv_chunk_rows : S;
  p->sm = sm_count;
  int rc = 0;
  for (int s = 0; s < 2 && !rc; ++s) rc = alloc(&p->qkv_buf[s], S * p->ld) | alloc(&p->act_buf[s], S * H);
  if (!rc) rc = alloc(&p->attn, S * p->QW) | alloc(&p->h, S * H) | alloc(&p->gu_buf, S * 2 * F) | alloc(&p->a, S * F) |
              alloc(&p->xn, S * H);
  if (!rc) rc = alloc(&p->lse, (size_t)hq * S) | (cudaMalloc(&p->ws, kLtWorkspace) == cudaSuccess ? 0 : 2);
  if (rc) return rc;
  if (cublasLtCreate(&p->lt) != CUBLAS_STATUS_SUCCESS) return 3;
  const int sm = sm_count;
  auto plan = [&](LtGemm* g, int64_t rows, int64_t K, int64_t N, int64_t lda, int64_t ldb, int64_t ldc, bool acc) {
    return rc ? rc : (rc = cuco_lt::lt_gemm_plan_ld(p->lt, g, rows, K, N, lda, ldb, ldc, CUDA_R_16BF, acc,
                                                   kLtWorkspace, sm) ? 4 : 0);
  };
  plan(&p->qkv, S, H, p->ld, H, p->ld, p->ld, false);
  plan(&p->q, S, H, p->QW, H, p->ld, p->ld, false);
  plan(&p->o, S, p->QW, H, p->QW, H, H, true);
  plan(&p->gu, S, H, 2 * F, H, 2 * F, 2 * F, false);
  plan(&p->down, S, F, H, F, H, H, true);
  if (p->chunk) {
    plan(&p->kv_chunk, p->chunk, H, 2 * D, H, p->ld, p->ld, false);
    if (S % p->chunk) plan(&p->kv_tail, S % p->chunk, H, 2 * D, H, p->ld, p->ld, false);
  }
  return rc;
}

extern "C" int cuco_kvt_destroy(cuco_kvt* p) {
  if (!p) return 0;
  for (LtGemm* g : {&p->qkv, &p->q, &p->kv_chunk, &p->kv_tail, &p->o, &p->gu, &p->down}) cuco_lt::lt_gemm_destroy(g);
  for (void* b : {(void*)p->qkv_buf[0], (void*)p->qkv_buf[1], (void*)p->act_buf[0], (void*)p->act_buf[1],
                  (void*)p->attn, (void*)p->h, (void*)p->gu_buf, (void*)p->a, (void*)p->lse, (void*)p->xn, p->ws})
    if (b) cudaFree(b);
  if (p->lt) cublasLtDestroy(p->lt);
  delete p;
  return 0;
}

extern "C" void* cuco_kvt_qkv(cuco_kvt* p, int slot) { return p->qkv_buf[slot & 1]; }
extern "C" void* cuco_kvt_act(cuco_kvt* p, int slot) { return p->act_buf[slot & 1]; }
extern "C" int64_t cuco_kvt_qkv_ld(const cuco_kvt* p) { return p->ld; }
extern "C" int64_t cuco_kvt_q_width(const cuco_kvt* p) { return p->QW; }

extern "C" int cuco_kvt_project(cuco_kvt* p, const void* w, const void* x, int slot, cudaStream_t s) {
  if (int rc = norm_rows(p, x, 0, p->S, s)) return rc;
  return cuco_lt::lt_gemm_run(p->lt, &p->qkv, p->xn, wpart(w, p->D, 0), p->qkv_buf[slot & 1], p->ws, s) ? 10 : 0;
}

// Normalises every row again rather than trusting the K/V chunks to have covered them (a few microseconds).
extern "C" int cuco_kvt_project_q(cuco_kvt* p, const void* w, const void* x, int slot, cudaStream_t s) {
  if (int rc = norm_rows(p, x, 0, p->S, s)) return rc;
  return cuco_lt::lt_gemm_run(p->lt, &p->q, p->xn, wpart(w, p->D, 0), p->qkv_buf[slot & 1], p->ws, s) ? 11 : 0;
}

// The fused schedule's Q: its K/V chunks (cuco_kvt_project_kv_rows) have just normalised every row into p->xn on
// this stream, so the Q columns read those rows as they are (no second RMSNorm of the layer input).
extern "C" int cuco_kvt_project_q_normed(cuco_kvt* p, const void* w, int slot, cudaStream_t s) {
  return cuco_lt::lt_gemm_run(p->lt, &p->q, p->xn, wpart(w, p->D, 0), p->qkv_buf[slot & 1], p->ws, s) ? 11 : 0;
}

extern "C" int cuco_kvt_project_kv_rows(cuco_kvt* p, const void* w, const void* x, int slot, int64_t row0,
                                        int64_t rows, cudaStream_t s) {
  if (!p->chunk || row0 < 0 || rows <= 0 || row0 + rows > p->S) return 12;
  const LtGemm* g = rows == p->chunk ? &p->kv_chunk : (rows == p->S % p->chunk ? &p->kv_tail : nullptr);
  if (!g || !g->op) return 13;  // only the planned chunk and tail sizes
  if (int rc = norm_rows(p, x, row0, rows, s)) return rc;
  const __nv_bfloat16* a = p->xn + row0 * H;
  __nv_bfloat16* c = p->qkv_buf[slot & 1] + row0 * p->ld + p->QW;
  return cuco_lt::lt_gemm_run(p->lt, g, a, wpart(w, p->D, 0) + p->QW, c, p->ws, s) ? 14 : 0;
}

extern "C" int cuco_kvt_finish(cuco_kvt* p, const void* w, const void* x, int slot, void* y, cudaStream_t s) {
  if (y == x) return 20;
  const __nv_bfloat16* qkv = p->qkv_buf[slot & 1];
  cuco::kit::fmha::Problem a{};
  a.q = qkv, a.k = qkv + p->QW, a.v = qkv + p->QW + p->D, a.o = p->attn, a.lse = p->lse;
  a.batch = 1, a.heads_q = p->hq, a.heads_kv = p->hkv, a.seq_q = (int)p->S, a.seq_k = (int)p->S;
  a.q_seq_stride = a.k_seq_stride = a.v_seq_stride = p->ld;
  a.q_head_stride = a.k_head_stride = a.v_head_stride = a.o_head_stride = DH;
  a.o_seq_stride = p->QW;
  a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = p->S * p->ld;
  a.o_batch_stride = p->S * p->QW;
  a.lse_head_stride = p->S, a.lse_batch_stride = (int64_t)p->hq * p->S;
  if (int st = cuco::kit::fmha::forward<CUCO_KVT_HEAD_DIM, true>(a, s)) return 30 + st;
  if (cuco_lt::lt_gemm_run_acc(p->lt, &p->o, p->attn, wpart(w, p->D, 1), x, p->h, p->ws, s)) return 21;
  if (int rc = norm_rows(p, p->h, 0, p->S, s)) return rc;
  if (cuco_lt::lt_gemm_run(p->lt, &p->gu, p->xn, wpart(w, p->D, 2), p->gu_buf, p->ws, s)) return 22;
  silu_mul_kernel<<<1024, 256, 0, s>>>(p->gu_buf, p->a, p->S);
  if (cudaGetLastError() != cudaSuccess) return 23;
  if (cuco_lt::lt_gemm_run_acc(p->lt, &p->down, p->a, wpart(w, p->D, 3), p->h, y, p->ws, s)) return 24;
  return 0;
}
