// Cooperative 128x256x64 / cluster 2x1x1 instantiation (its own translation unit: compiles in parallel).
#include "ag_gemm_kernel.cuh"

namespace cuco_ag_gemm {
int run_coop128x256(const cuco_ag_gemm_args* a, int sm_count, cudaStream_t s) {
  return Coop128x256::run(a, sm_count, s);
}
}  // namespace cuco_ag_gemm
