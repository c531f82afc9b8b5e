// Epoch flags without NCCL: the launch epoch, the rolling "reached" test and the system-scope release store,
// acquire load and spin-wait on a flag. cuco/lsa.cuh (which needs NCCL's device API) includes it; a compute library
// built without NCCL (a GEMM waiting for rows, cuco/kit/compute/row_arrival.cuh) includes it alone.
#pragma once

#include <stdint.h>

#include <cuda_runtime.h>

namespace cuco {
namespace lsa {

// ---- epochs and flags --------------------------------------------------------------------------------

// The epoch of a launch: never 0, so zero-initialised flags never look ready.
__host__ __device__ inline uint32_t epoch_of(uint64_t iteration) {
  uint32_t e = (uint32_t)(iteration + 1);
  return e == 0 ? 1u : e;
}

// The epoch after e (the launch after): never 0, as epoch_of. Candidates keep it on the device (kit/stream_sync.cuh).
__host__ __device__ inline uint32_t next_epoch(uint32_t e) { return e + 1 == 0 ? 1u : e + 1; }

// The epoch before e: the previous launch's (0xFFFFFFFF before 1, as next_epoch wraps). On the first launch (e = 1)
// zero-initialised flags have reached it, so a wait for "the previous launch" passes at once.
__host__ __device__ inline uint32_t prev_epoch(uint32_t e) { return e == 1 ? 0xFFFFFFFFu : e - 1; }

// Rolling comparison: true when flag value v is at or past epoch e (survives 32-bit wrap-around).
__host__ __device__ inline bool epoch_reached(uint32_t v, uint32_t e) { return (int32_t)(v - e) >= 0; }

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Spin (with back-off) until *p has reached epoch e. Acquire: data published before the flag is visible after.
__device__ inline void wait_epoch(const uint32_t* p, uint32_t e) {
  unsigned ns = 32;
  while (!epoch_reached(load_acquire_sys(p), e)) {
    __nanosleep(ns);
    if (ns < 1024) ns <<= 1;
  }
}

}  // namespace lsa
}  // namespace cuco
