// Ping-pong 128x128x64 / cluster 2x1x1 instantiation (its own translation unit: compiles in parallel).
#include "ag_gemm_kernel.cuh"

namespace cuco_ag_gemm {
int run_pingpong128x128(const cuco_ag_gemm_args* a, int sm_count, cudaStream_t s) {
  return Pingpong128x128::run(a, sm_count, s);
}
}  // namespace cuco_ag_gemm
