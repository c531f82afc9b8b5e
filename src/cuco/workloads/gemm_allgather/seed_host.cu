// Host-driven GEMM+AllGather: the program a user brings, in candidate-ABI form, and the baseline that fitness
// is measured against. ncclAllGather gathers every rank's A_r into A_full, then one cuBLASLt GEMM computes
// C = A_full . B (bf16 in/out, fp32 accumulate) with the heuristic's best algorithm.
//
// Buffers: 0 A_local (M/W x K), 1 B (K x N), 2 C (M x N), 3 A_full (M x K); all bf16, row-major.
#include <stdint.h>
#include <stdio.h>

#include <cublasLt.h>

#include "cuco/abi.h"

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
  cublasLtHandle_t lt = nullptr;
};

}  // namespace

extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  (void)ctx;
  req->workspace_bytes = kWorkspaceBytes;
  return 0;
}

// Row-major C[M x N] = A[M x K] . B[K x N] is the column-major C^T = B^T . A^T: m=N, n=M, k=K, no transposes.
extern "C" int cuco_candidate_setup(cuco_ctx* ctx) {
  const int64_t M = ctx->dims[0], K = ctx->dims[1], N = ctx->dims[2];
  Plan* p = new Plan();
  ctx->candidate_state = p;
  if (cublasLtCreate(&p->lt) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasLtHandle_t h = p->lt;
  if (cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasOperation_t n = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof(n));
  cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n));
  if (cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, N, K, N) != CUBLAS_STATUS_SUCCESS) return 2;
  if (cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, K, M, K) != CUBLAS_STATUS_SUCCESS) return 2;
  if (cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_16BF, N, M, N) != CUBLAS_STATUS_SUCCESS) return 2;
  cublasLtMatmulPreference_t pref;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return 3;
  size_t ws = ctx->workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found < 1) return 4;
  p->algo = res.algo;
  return 0;
}

extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  const int64_t M = ctx->dims[0], K = ctx->dims[1];
  Plan* p = (Plan*)ctx->candidate_state;
  void* a_local = ctx->buffers[0].ptr;
  void* b = ctx->buffers[1].ptr;
  void* c = ctx->buffers[2].ptr;
  void* a_full = ctx->buffers[3].ptr;
  if (ncclAllGather(a_local, a_full, (size_t)(M / ctx->world) * K, ncclBfloat16, ctx->comm, ctx->stream) !=
      ncclSuccess)
    return 10;
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t st = cublasLtMatmul(p->lt, p->op, &alpha, b, p->la, a_full, p->lb, &beta,
                                     c, p->lc, c, p->lc, &p->algo, ctx->workspace, ctx->workspace_bytes, ctx->stream);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : 20;
}

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) {
  Plan* p = (Plan*)ctx->candidate_state;
  if (!p) return 0;
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  if (p->op) cublasLtMatmulDescDestroy(p->op);
  if (p->lt) cublasLtDestroy(p->lt);
  delete p;
  ctx->candidate_state = nullptr;
  return 0;
}
