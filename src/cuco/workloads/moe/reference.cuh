// Kernels of the MoE plugin: seeded generation, the input-integrity check and the independent fp32 reference
// (SIMT, expert by expert) with the per-token comparison. Never used by candidates.
#pragma once

#include <stdint.h>

#include <cuda_bf16.h>

#include "cuco/gen.cuh"

namespace cuco_moe_ref {

enum { GEN_X = 0, GEN_W1 = 1, GEN_W2 = 2 };

__global__ void gen_scaled_bf16(__nv_bfloat16* out, uint64_t n, uint64_t seed, int rank, int buf, uint64_t first,
                                float scale) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(cuco::gen_value(seed, rank, buf, first + i) * scale);
}

// Received rows of the compute part: row r is token t of source p (rowmap), regenerated from the seed.
__global__ void gen_rows(__nv_bfloat16* out, const int64_t* rowmap, int64_t rows, int64_t H, int64_t K,
                         uint64_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * H; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = rowmap[i / H];
    const int64_t t = (m & 0xffffffffll) / K;
    out[i] = __float2bfloat16(cuco::gen_value(seed, (int)(m >> 32), GEN_X, (uint64_t)(t * H + i % H)));
  }
}

// Elements of a bf16 buffer that differ from the seeded values (a candidate must not touch its inputs).
__global__ void count_changed(const __nv_bfloat16* buf, uint64_t n, uint64_t seed, int rank, int id, float scale,
                              unsigned long long* bad) {
  unsigned long long c = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    if (__bfloat162float(buf[i]) != cuco::gen_value(seed, rank, id, i) * scale) ++c;
  if (c) atomicAdd(bad, c);
}

// C[m, n] = sum_k A[row(m), k] * B[n, k] in fp32 (A: bf16 rows picked by arow, or fp32 rows in order; B: bf16
// N x Kd row-major). 64 x 64 tiles, 4 x 4 per thread.
template <typename TA>
__global__ void ref_gemm(const TA* A, const int32_t* arow, int M, const __nv_bfloat16* B, int N, int Kd, float* C) {
  __shared__ float as[16][65], bs[16][65];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < Kd; k0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      const int r = i / 16, k = i % 16;
      const int m = m0 + r, n = n0 + r;
      float av = 0.f;
      if (m < M) {
        const int64_t ar = arow ? arow[m] : m;
        av = (float)A[ar * Kd + k0 + k];
      }
      as[k][r] = av;
      bs[k][r] = n < N ? __bfloat162float(B[(int64_t)n * Kd + k0 + k]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += as[k][ty * 4 + i] * bs[k][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < M && n < N) C[(int64_t)m * N + n] = acc[i][j];
    }
}

__global__ void ref_swiglu(const float* h, int64_t M, int64_t I, float* act) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < M * I; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = i / I, c = i % I;
    const float g = h[m * 2 * I + c], u = h[m * 2 * I + I + c];
    act[i] = g / (1.f + expf(-g)) * u;
  }
}

__global__ void ref_accumulate(const float* out, const int32_t* tok, const float* gate, int64_t M, int64_t H,
                               float* yref) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < M * H; i += (int64_t)gridDim.x * blockDim.x)
    yref[(int64_t)tok[i / H] * H + i % H] += gate[i / H] * out[i];
}

// Per token: squared error and squared reference; NaN/Inf count; global sums.
__global__ void compare_tokens(const __nv_bfloat16* y, const float* r, int64_t T, int64_t H, double* tok_err,
                               double* tok_ref, unsigned long long* nnan, float* maxabs) {
  __shared__ double se[256], sr[256];
  for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
    double e = 0, rr = 0;
    unsigned long long nn = 0;
    float mx = 0.f;
    for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
      const float yv = __bfloat162float(y[t * H + c]), rv = r[t * H + c];
      rr += (double)rv * rv;
      if (!isfinite(yv)) { ++nn; continue; }
      const float d = fabsf(yv - rv);
      e += (double)d * d;
      mx = fmaxf(mx, d);
    }
    se[threadIdx.x] = e, sr[threadIdx.x] = rr;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) se[threadIdx.x] += se[threadIdx.x + s], sr[threadIdx.x] += sr[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) tok_err[t] = se[0], tok_ref[t] = sr[0];
    if (nn) atomicAdd(nnan, nn);
    atomicMax((unsigned int*)maxabs, __float_as_uint(mx));
    __syncthreads();
  }
}

}  // namespace cuco_moe_ref
