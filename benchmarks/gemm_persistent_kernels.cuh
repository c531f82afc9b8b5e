// Device helpers of benchmarks/gemm_persistent.cu: random fill, poison, error count, and the paced copier that
// stands in for NVLink in the one-GPU arrival proxy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void fill_random(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    p[i] = __float2bfloat16((float)((z >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f);  // uniform [-1, 1)
  }
}

__global__ void fill_u16(uint16_t* p, size_t n, uint16_t v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

// Counts elements of C (bf16) off the fp32 reference by more than rtol*|ref| + atol (NaN counts as off).
__global__ void count_bad(const __nv_bfloat16* c, const float* ref, size_t n, float rtol, float atol,
                          unsigned long long* bad) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float r = ref[i], v = __bfloat162float(c[i]);
    if (!(fabsf(v - r) <= rtol * fabsf(r) + atol)) ++local;
  }
  if (local) atomicAdd(bad, local);
}

// The proxy's "NVLink": a few CTAs copy the remote rows chunk by chunk from a second buffer. Chunk c is copied
// from t0 + c*T on and its flag rises at max(copy done, t0 + (c+1)*T), T = chunk bytes / rate (ns_per_chunk 0:
// as fast as the CTAs go). The last CTA to finish a chunk raises its flag (release at gpu scope after a fence);
// counters reset themselves for the next run.
constexpr int kCopyThreads = 1024, kCopyUnroll = 8;

__global__ void __launch_bounds__(kCopyThreads) paced_copy(const int4* __restrict__ src, int4* __restrict__ dst,
                                                          int64_t total16, int64_t chunk16, int nchunks,
                                                          unsigned long long ns_per_chunk, uint32_t* flags,
                                                          uint32_t* counters, uint32_t epoch) {
  const unsigned long long t0 = globaltimer_ns();  // the CTAs start within microseconds of each other
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int c = 0; c < nchunks; ++c) {
    if (ns_per_chunk) {
      if (threadIdx.x == 0)
        while (globaltimer_ns() - t0 < (unsigned long long)c * ns_per_chunk) {
        }
      __syncthreads();
    }
    const int64_t end = (c + 1) * chunk16 < total16 ? (c + 1) * chunk16 : total16;
    int64_t i = c * chunk16 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (; i + (kCopyUnroll - 1) * stride < end; i += kCopyUnroll * stride) {
      int4 v[kCopyUnroll];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) dst[i + u * stride] = v[u];
    }
    for (; i < end; i += stride) dst[i] = src[i];
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(&counters[c], 1u) == gridDim.x - 1) {
        counters[c] = 0;
        if (ns_per_chunk)
          while (globaltimer_ns() - t0 < (unsigned long long)(c + 1) * ns_per_chunk) {
          }
        __threadfence();
        asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + c), "r"(epoch) : "memory");
      }
    }
  }
}
