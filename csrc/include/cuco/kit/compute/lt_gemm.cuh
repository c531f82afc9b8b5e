// cuBLASLt GEMM plans for row-major D[rows x N] = A[rows x K] . B[K x N] (+ C when accumulating): bf16 inputs,
// fp32 accumulate, bf16 or fp32 output. Shared by every workload whose compute or reference is a cuBLASLt GEMM.
//
// cuBLASLt is column-major, so the row-major product is computed as D^T = B^T . A^T: m = N, n = rows, k = K, both
// operands untransposed. A sub-range of A's rows, or a block of B's columns, is then a plain pointer offset with
// the matrix's leading dimension (lda, ldb, ldc: elements between consecutive rows).
#pragma once

#include <stdint.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace cuco_lt {

struct LtGemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  int64_t rows = 0, K = 0, N = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;  // 1: D = C + A.B (a residual add in the epilogue), 0: D = A.B
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

// Build a plan with explicit leading dimensions and pick the heuristic's best algorithm. out_type: CUDA_R_16BF or
// CUDA_R_32F (references). accumulate: D = C + A.B with C laid out like D. sm_target > 0 asks cuBLASLt to use only
// that many SMs (leaving the rest to a communication kernel). 0 on success, else the cublasStatus_t (or -1 when the
// heuristic offers nothing).
inline int lt_gemm_plan_ld(cublasLtHandle_t h, LtGemm* g, int64_t rows, int64_t K, int64_t N, int64_t lda,
                           int64_t ldb, int64_t ldc, cudaDataType_t out_type, bool accumulate, size_t ws_bytes,
                           int sm_target) {
  lt_gemm_destroy(g);
  g->rows = rows;
  g->K = K;
  g->N = N;
  g->lda = lda;
  g->ldb = ldb;
  g->ldc = ldc;
  g->beta = accumulate ? 1.0f : 0.0f;
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
  if ((st = cublasLtMatrixLayoutCreate(&g->la, CUDA_R_16BF, N, K, ldb)) != CUBLAS_STATUS_SUCCESS) return (int)st;
  if ((st = cublasLtMatrixLayoutCreate(&g->lb, CUDA_R_16BF, K, rows, lda)) != CUBLAS_STATUS_SUCCESS) return (int)st;
  if ((st = cublasLtMatrixLayoutCreate(&g->lc, out_type, N, rows, ldc)) != CUBLAS_STATUS_SUCCESS) return (int)st;
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

// A dense plan: lda = K, ldb = ldc = N, no accumulation.
inline int lt_gemm_plan(cublasLtHandle_t h, LtGemm* g, int64_t rows, int64_t K, int64_t N, cudaDataType_t out_type,
                        size_t ws_bytes, int sm_target) {
  return lt_gemm_plan_ld(h, g, rows, K, N, K, N, N, out_type, false, ws_bytes, sm_target);
}

// D = A . B (+ C when the plan accumulates; C may equal D) on stream s.
inline int lt_gemm_run_acc(cublasLtHandle_t h, const LtGemm* g, const void* A, const void* B, const void* C, void* D,
                           void* ws, cudaStream_t s) {
  const float alpha = 1.0f;
  cublasStatus_t st = cublasLtMatmul(h, g->op, &alpha, B, g->la, A, g->lb, &g->beta, g->beta != 0.0f ? C : D, g->lc,
                                     D, g->lc, &g->algo, ws, g->ws_bytes, s);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : (int)st;
}

// C[rows x N] = A[rows x K] . B[K x N] on stream s.
inline int lt_gemm_run(cublasLtHandle_t h, const LtGemm* g, const void* A, const void* B, void* C, void* ws,
                       cudaStream_t s) {
  return lt_gemm_run_acc(h, g, A, B, C, C, ws, s);
}

}  // namespace cuco_lt
