// Delayed-arrival verification: a spin kernel queued on the side stream ahead of a candidate's launch, so the
// communication path a candidate puts there (pull/put kernels, copy-engine copies, flag writes) starts late.
// A candidate that reads remote data without waiting for its flag then reads poison and fails the check, even
// at W = 1, where data would otherwise be "there" at once.
#include "delay.h"

namespace cuco_harness {

namespace {

__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace

cudaError_t enqueue_delay(cudaStream_t stream, double microseconds) {
  if (microseconds <= 0) return cudaSuccess;
  spin_kernel<<<1, 1, 0, stream>>>((unsigned long long)(microseconds * 1000.0));
  return cudaGetLastError();
}

}  // namespace cuco_harness
