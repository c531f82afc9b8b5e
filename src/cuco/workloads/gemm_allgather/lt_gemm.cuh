// cuBLASLt GEMM plans of GEMM+AllGather: the kit's shared plans (cuco/kit/compute/lt_gemm.cuh) under this
// workload's namespace. The rendered device-initiated candidates inline this file; the workload plugin includes it.
#pragma once

#include "cuco/kit/compute/lt_gemm.cuh"

namespace cuco_ag {
using cuco_lt::LtGemm;
using cuco_lt::lt_gemm_destroy;
using cuco_lt::lt_gemm_plan;
using cuco_lt::lt_gemm_run;
}  // namespace cuco_ag
