// cuBLASLt GEMM plans for row-major C[rows x N] = A[rows x K] . B[K x N] (bf16 inputs, fp32 accumulate).
//
// cuBLASLt is column-major, so the row-major product is computed as C^T = B^T . A^T: m = N, n = rows, k = K,
// both operands untransposed. A sub-range of A's rows is then a plain pointer offset (A + row0*K, C + row0*N).
// The rendered device-initiated candidates inline this file; the workload plugin includes it.
#pragma once

#include <stdint.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace cuco_ag {

struct LtGemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  int64_t rows = 0, K = 0, N = 0;
  int sm_target = 0;  // 0: all SMs
  size_t ws_bytes = 0;
};

inline void lt_gemm_destroy(LtGemm* g) {
  if (g->la) cublasLtMatrixLayoutDestroy(g->la);
  if (g->lb) cublasLtMatrixLayoutDestroy(g->lb);
  if (g->lc) cublasLtMatrixLayoutDestroy(g->lc);
  if (g->op) cublasLtMatmulDescDestroy(g->op);
  *g = LtGemm();
}

// Build a plan and pick the heuristic's best algorithm. out_type: CUDA_R_16BF (candidates) or CUDA_R_32F
// (references). sm_target > 0 asks cuBLASLt to use only that many SMs (leaving the rest to a comm kernel).
// Returns 0 on success, else the cublasStatus_t (or -1 when the heuristic offers nothing).
inline int lt_gemm_plan(cublasLtHandle_t h, LtGemm* g, int64_t rows, int64_t K, int64_t N, cudaDataType_t out_type,
                        size_t ws_bytes, int sm_target) {
  lt_gemm_destroy(g);
  g->rows = rows;
  g->K = K;
  g->N = N;
  g->sm_target = sm_target;
  g->ws_bytes = ws_bytes;
  cublasStatus_t st = cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  cublasOperation_t nt = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &nt, sizeof(nt));
  cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt));
  if (sm_target > 0) {
    int32_t t = sm_target;
    st = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &t, sizeof(t));
    if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  }
  if ((st = cublasLtMatrixLayoutCreate(&g->la, CUDA_R_16BF, N, K, N)) != CUBLAS_STATUS_SUCCESS) return (int)st;
  if ((st = cublasLtMatrixLayoutCreate(&g->lb, CUDA_R_16BF, K, rows, K)) != CUBLAS_STATUS_SUCCESS) return (int)st;
  if ((st = cublasLtMatrixLayoutCreate(&g->lc, out_type, N, rows, N)) != CUBLAS_STATUS_SUCCESS) return (int)st;
  cublasLtMatmulPreference_t pref = nullptr;
  if ((st = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) return (int)st;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
  cublasLtMatmulHeuristicResult_t res[1];
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(h, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return (int)st;
  if (found < 1) return -1;
  g->algo = res[0].algo;
  return 0;
}

// C[rows x N] = A[rows x K] . B[K x N] on stream s.
inline int lt_gemm_run(cublasLtHandle_t h, const LtGemm* g, const void* A, const void* B, void* C, void* ws,
                       cudaStream_t s) {
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasLtMatmul(h, g->op, &alpha, B, g->la, A, g->lb, &beta, C, g->lc, C, g->lc, &g->algo,
                                     ws, g->ws_bytes, s);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : (int)st;
}

}  // namespace cuco_ag
