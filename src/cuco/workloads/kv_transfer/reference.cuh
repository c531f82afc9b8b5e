// Reference kernels of the KV-transfer plugin: plain SIMT code, independent of the compute library's kernels
// (its GEMMs are the plugin's own cuBLASLt calls with fp32 outputs). Only the check runs them.
#pragma once

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "cuco/gen.cuh"

namespace cuco_kv_ref {

// Generator ids (cuco::gen_value's buffer argument).
enum { GEN_X = 0, GEN_W = 1 };

// Weights: uniform values times 2^-s with 2^s ~ sqrt(fan-in), exact in bf16; element `first + i` of the weights.
__global__ void gen_scaled_bf16(__nv_bfloat16* out, uint64_t n, uint64_t seed, uint64_t first, float scale) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(cuco::gen_value(seed, 0, GEN_W, first + i) * scale);
}

// out = bf16(a + b) (b may be null): the rounding the candidates' bf16 GEMM outputs and residual epilogues do.
__global__ void round_add(const float* a, const __nv_bfloat16* b, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(a[i] + (b ? __bfloat162float(b[i]) : 0.0f));
}

// y = bf16(x / sqrt(mean(x^2) + 1e-5)) per row of n values (RMSNorm, unit scale), one CTA per row.
__global__ void rms_norm(const __nv_bfloat16* x, int64_t n, __nv_bfloat16* y) {
  __shared__ float part[256];
  const __nv_bfloat16* row = x + blockIdx.x * n;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) ss += __bfloat162float(row[c]) * __bfloat162float(row[c]);
  part[threadIdx.x] = ss;
  __syncthreads();
  for (int half = blockDim.x / 2; half; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  const float scale = 1.0f / sqrtf(part[0] / (float)n + 1e-5f);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    y[blockIdx.x * n + c] = __float2bfloat16(__bfloat162float(row[c]) * scale);
}

// a = bf16(silu(g) * u) from the fp32 gate/up GEMM, rounded to bf16 first as the candidates' GEMM output is.
__global__ void silu_mul(const float* gu, int64_t rows, int64_t F, __nv_bfloat16* a) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * F; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / F, c = i % F;
    const float g = __bfloat162float(__float2bfloat16(gu[r * 2 * F + c]));
    const float u = __bfloat162float(__float2bfloat16(gu[r * 2 * F + F + c]));
    a[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
  }
}

// sc[0..n) = exp(sc - max) in place, by a CTA of 4 warps (red: 4 floats of shared memory); returns their sum: the
// exact two-pass softmax's denominator. Every thread of the CTA calls it (it synchronises the CTA).
__device__ inline float softmax_in_place(float* sc, int64_t n, float* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, sc[j]);
  for (int off = 16; off; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += (sc[j] = expf(sc[j] - m));
  for (int off = 16; off; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) red[warp] = sum;
  __syncthreads();
  return red[0] + red[1] + red[2] + red[3];
}

// Causal GQA attention, one CTA (4 warps, 128 threads = head dim) per (query row i, query head h): scores in shared
// memory (S floats), exact two-pass softmax in fp32, o rounded to bf16. Query head h reads KV head h / group.
__global__ void attention(const __nv_bfloat16* qkv, int64_t ld, int64_t qw, int64_t D, int group, __nv_bfloat16* o) {
  extern __shared__ float sc[];
  __shared__ float red[4];
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y, hk = h / group, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const __nv_bfloat16* q = qkv + i * ld + h * 128;
  float qv[4];
  for (int u = 0; u < 4; ++u) qv[u] = __bfloat162float(q[lane * 4 + u]);
  for (int64_t j = warp; j <= i; j += 4) {
    const __nv_bfloat16* k = qkv + j * ld + qw + hk * 128;
    float s = 0.f;
    for (int u = 0; u < 4; ++u) s += qv[u] * __bfloat162float(k[lane * 4 + u]);
    for (int off = 16; off; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) sc[j] = s * rsqrtf(128.0f);
  }
  const float sum = softmax_in_place(sc, i + 1, red);
  float acc = 0.f;
  const __nv_bfloat16* v = qkv + qw + D + hk * 128 + threadIdx.x;
  for (int64_t j = 0; j <= i; ++j) acc += sc[j] * __bfloat162float(v[j * ld]);
  o[i * qw + h * 128 + threadIdx.x] = __float2bfloat16(acc / sum);
}

// The decode step's attention over one layer's cache, as the decode rank consumes it: query row `qrow` of qkv (every
// query head, one CTA of 128 threads each) against all S tokens, K and V read through the decode block table from
// the paged cache (pages: the layer's [2][pool][16][D]) or, for the reference, from qkv's own K/V columns (pages
// null); exact two-pass softmax in fp32, o fp32 [qw]. Scores in shared memory (S floats).
__global__ void decode_attention(const __nv_bfloat16* qkv, int64_t ld, int64_t qw, int64_t D, int group, int64_t S,
                                 int64_t qrow, const __nv_bfloat16* pages, const int32_t* table, int64_t pool,
                                 float* o) {
  extern __shared__ float sc[];
  __shared__ float red[4];
  const int h = blockIdx.x, hk = h / group, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto at = [&](int64_t t, int plane, int64_t c) {
    return __bfloat162float(pages ? pages[((plane * pool + table[t / 16]) * 16 + t % 16) * D + c]
                                  : qkv[t * ld + qw + plane * D + c]);
  };
  const __nv_bfloat16* q = qkv + qrow * ld + h * 128;
  float qv[4];
  for (int u = 0; u < 4; ++u) qv[u] = __bfloat162float(q[lane * 4 + u]);
  for (int64_t j = warp; j < S; j += 4) {
    float s = 0.f;
    for (int u = 0; u < 4; ++u) s += qv[u] * at(j, 0, hk * 128 + lane * 4 + u);
    for (int off = 16; off; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) sc[j] = s * rsqrtf(128.0f);
  }
  const float sum = softmax_in_place(sc, S, red);
  float acc = 0.f;
  for (int64_t j = 0; j < S; ++j) acc += sc[j] * at(j, 1, hk * 128 + threadIdx.x);
  o[h * 128 + threadIdx.x] = acc / sum;
}

// Per (block b, plane kv) of one layer: squared error and squared reference of the candidate's page dtab[b] against
// the reference K/V rows (qkv columns qw + kv*D ...), and NaN/Inf count (unwritten poison).
__global__ void compare_blocks(const __nv_bfloat16* pages, const int32_t* dtab, int64_t pool, const __nv_bfloat16* qkv,
                               int64_t ld, int64_t qw, int64_t D, double* sse, double* ssr,
                               unsigned long long* nnan) {
  __shared__ double se[256], sr[256];
  const int64_t b = blockIdx.x;
  const int kv = blockIdx.y;
  const __nv_bfloat16* page = pages + ((kv * pool + dtab[b]) * 16) * D;
  double e = 0, r = 0;
  unsigned long long bad = 0;
  for (int64_t x = threadIdx.x; x < 16 * D; x += blockDim.x) {
    const int64_t t = x / D, d = x % D;
    const float c = __bfloat162float(page[x]);
    const float ref = __bfloat162float(qkv[(b * 16 + t) * ld + qw + kv * D + d]);
    r += (double)ref * ref;
    if (!isfinite(c)) {
      ++bad;
      continue;
    }
    e += (double)(c - ref) * (c - ref);
  }
  se[threadIdx.x] = e, sr[threadIdx.x] = r;
  __syncthreads();
  for (int s = blockDim.x / 2; s; s >>= 1) {
    if (threadIdx.x < s) se[threadIdx.x] += se[threadIdx.x + s], sr[threadIdx.x] += sr[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) sse[b * 2 + kv] = se[0], ssr[b * 2 + kv] = sr[0];
  if (bad) atomicAdd(nnan, bad);
}

}  // namespace cuco_kv_ref
