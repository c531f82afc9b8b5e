// cuco fast path, standalone programs only (cuco run prog.cu): delayed arrival for the program harness's
// verification, and a trace of where host time goes. A candidate in harness form gets neither (the harness
// delays and times communication itself), so nothing here reads the environment or a clock there.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CUCOFP_PROGRAM_HOOKS 1

namespace cucofp {

// Delayed arrival (CUCO_DELAY_COMM_US): the communication path starts late, so a program that reads received
// data without waiting for it reads stale memory even when every peer is on this GPU.
__global__ void delayKernel(long long ns) {
  long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
inline long long delayNs() {
  static long long ns = [] { const char* v = getenv("CUCO_DELAY_COMM_US"); return v ? (long long)(atof(v) * 1000) : 0ll; }();
  return ns;
}
// CUCOFP_TRACE=1: the host time of each set-up and issue step on stderr (for finding where time goes).
inline bool tracing() { static bool on = getenv("CUCOFP_TRACE") != nullptr; return on; }
inline double nowUs() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
#define CUCOFP_TRACE(...) do { if (tracing()) { fprintf(stderr, "cucofp %.1f us: ", nowUs()); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
// placement=stream_overlap: the communicator's own stream (a candidate in harness form uses the harness's)
inline cudaError_t newSideStream(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline cudaError_t freeSideStream(cudaStream_t s) { return cudaStreamDestroy(s); }
// Staggered by rank (the harness's rule, csrc/harness/delay.h): rank r starts delayNs() * (1 + r / 2) late, so a
// rank that reads from a higher one without waiting reads before it has written, whatever the world size.
inline void delayComm(cudaStream_t st, int rank) {
  if (delayNs() > 0) delayKernel<<<1, 1, 0, st>>>(delayNs() + delayNs() * rank / 2);
}
// Under delayed arrival the copy-engine path also fills what it is about to receive with NaN after the delay
// (the peers' data is not there yet), so copies that do not wait for the entry kernel are caught at W = 1 too.
inline void poisonLate(void* dst, size_t bytes, cudaStream_t st) { if (delayNs() > 0) cudaMemsetAsync(dst, 0xff, bytes, st); }

}  // namespace cucofp
