// Output checks for workload plugins: a bf16 output against an fp32 reference computed independently.
// Two passes over the output: (1) squared error, squared reference, NaN/Inf count (unwritten poison shows up
// here), max |c - r|; (2) elements outside |c - r| <= rtol * |r| + atol, where atol = atol_rms * rms(reference)
// so the tolerance follows the data's scale.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "cuco/abi.h"

namespace cuco {
namespace kit {

struct CompareStats {
  double sse, ssr;
  unsigned long long nnan, nbad;
  unsigned int maxbits;     // max |c - r| as float bits (non-negative floats order like their bits)
  unsigned int refmaxbits;  // max |r|, the same way: a scale for max |c - r|
};

__device__ inline void block_add(double* smem, double v, double* out) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, smem[0]);
  __syncthreads();
}

constexpr int kCompareThreads = 256;

__global__ void compare_pass1(const __nv_bfloat16* c, const float* r, size_t n, CompareStats* st) {
  __shared__ double smem[kCompareThreads];
  double sse = 0, ssr = 0;
  unsigned long long nnan = 0;
  float mx = 0.f, rmx = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float cv = __bfloat162float(c[i]), rv = r[i];
    ssr += (double)rv * rv;
    rmx = fmaxf(rmx, fabsf(rv));
    if (!isfinite(cv)) {
      ++nnan;
      continue;
    }
    float d = fabsf(cv - rv);
    sse += (double)d * d;
    mx = fmaxf(mx, d);
  }
  block_add(smem, sse, &st->sse);
  block_add(smem, ssr, &st->ssr);
  if (nnan) atomicAdd(&st->nnan, nnan);
  atomicMax(&st->maxbits, __float_as_uint(mx));
  atomicMax(&st->refmaxbits, __float_as_uint(rmx));
}

__global__ void compare_pass2(const __nv_bfloat16* c, const float* r, size_t n, float rtol, float atol,
                              CompareStats* st) {
  unsigned long long nbad = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float cv = __bfloat162float(c[i]), rv = r[i];
    if (isfinite(cv) && fabsf(cv - rv) > rtol * fabsf(rv) + atol) ++nbad;
  }
  if (nbad) atomicAdd(&st->nbad, nbad);
}

// Both passes on stream st into dstats (device memory, zeroed here); synchronises st once, between the passes
// (pass 2's atol needs the reference's rms). Copy dstats back after any further work on st.
inline cudaError_t compare_bf16(const __nv_bfloat16* c, const float* r, size_t n, float rtol, double atol_rms,
                                CompareStats* dstats, cudaStream_t st) {
  cudaError_t e = cudaMemsetAsync(dstats, 0, sizeof(CompareStats), st);
  if (e != cudaSuccess) return e;
  compare_pass1<<<1024, kCompareThreads, 0, st>>>(c, r, n, dstats);
  CompareStats h;
  if ((e = cudaMemcpyAsync(&h, dstats, sizeof(h), cudaMemcpyDeviceToHost, st)) != cudaSuccess) return e;
  if ((e = cudaStreamSynchronize(st)) != cudaSuccess) return e;
  const double rms = n ? sqrt(h.ssr / (double)n) : 0.0;
  compare_pass2<<<1024, kCompareThreads, 0, st>>>(c, r, n, rtol, (float)(atol_rms * rms), dstats);
  return cudaGetLastError();
}

// The numbers of a cuco_check_result from the final stats (passed and message are the plugin's to set).
inline void fill_check(const CompareStats& h, size_t n, cuco_check_result* out) {
  out->n_checked = (int64_t)n;
  out->n_nan = (int64_t)h.nnan;
  out->n_bad = (int64_t)h.nbad;
  out->rel_l2_err = h.ssr > 0 ? sqrt(h.sse / h.ssr) : (h.sse > 0 ? INFINITY : 0.0);
  float mx;
  memcpy(&mx, &h.maxbits, 4);
  out->max_abs_err = (double)mx;
}

// max |r| of the final stats (the reference's scale, for a relative max error).
inline double ref_max_abs(const CompareStats& h) {
  float mx;
  memcpy(&mx, &h.refmaxbits, 4);
  return (double)mx;
}

}  // namespace kit
}  // namespace cuco
