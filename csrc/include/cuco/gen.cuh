// Deterministic input generation shared by workload plugins (fill) and their references (check).
// Value of element i of buffer `buf` on rank `rank` for seed `seed`: a hash, so any rank can regenerate
// any other rank's inputs without communicating, which keeps references independent of candidates.
#pragma once

#include <stdint.h>
#include <cuda_bf16.h>

namespace cuco {

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), exactly representable in bf16 (8 significant bits) so fill and reference agree bit for bit.
__host__ __device__ inline float gen_value(uint64_t seed, int rank, int buf, uint64_t i) {
  uint64_t h = splitmix64(seed * 0x100000001B3ull ^ splitmix64(((uint64_t)rank << 40) ^ ((uint64_t)buf << 32) ^ i));
  int q = (int)(h >> 56) - 128;  // 256 levels
  return (float)q / 128.0f;
}

__global__ void gen_fill_bf16_kernel(__nv_bfloat16* out, uint64_t n, uint64_t seed, int rank, int buf) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(gen_value(seed, rank, buf, i));
}

__global__ void gen_fill_f32_kernel(float* out, uint64_t n, uint64_t seed, int rank, int buf) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    out[i] = gen_value(seed, rank, buf, i);
}

inline cudaError_t gen_fill_bf16(__nv_bfloat16* out, uint64_t n, uint64_t seed, int rank, int buf, cudaStream_t s) {
  gen_fill_bf16_kernel<<<1024, 256, 0, s>>>(out, n, seed, rank, buf);
  return cudaGetLastError();
}

inline cudaError_t gen_fill_f32(float* out, uint64_t n, uint64_t seed, int rank, int buf, cudaStream_t s) {
  gen_fill_f32_kernel<<<1024, 256, 0, s>>>(out, n, seed, rank, buf);
  return cudaGetLastError();
}

}  // namespace cuco
