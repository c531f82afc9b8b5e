// Argument checks and dispatch of cuco_ag_gemm_persistent (no CUTLASS here: this unit compiles in seconds).
#include <stdio.h>

#include "ag_gemm.h"

namespace cuco_ag_gemm {
int run_coop128x256(const cuco_ag_gemm_args* a, int sm_count, cudaStream_t s);
int run_pingpong128x128(const cuco_ag_gemm_args* a, int sm_count, cudaStream_t s);

constexpr int64_t kTileM = 128, kRowsPerCluster = 256, kAlign = 8;  // both configs: tile M 128, cluster 2 along M

static int fail(char* why, int len, int code, const char* msg) {
  if (why && len > 0) snprintf(why, (size_t)len, "%s", msg);
  return code;
}
}  // namespace cuco_ag_gemm

extern "C" int cuco_ag_gemm_check(const cuco_ag_gemm_args* a, char* why, int len) {
  using namespace cuco_ag_gemm;
  char msg[320];
  if (!a) return fail(why, len, 1, "args is NULL: pass a filled cuco_ag_gemm_args");
  if (!a->A || !a->B || !a->C) return fail(why, len, 2, "A, B and C must be device pointers, not NULL");
  if (((uintptr_t)a->A | (uintptr_t)a->B | (uintptr_t)a->C) % 16)
    return fail(why, len, 3, "A, B and C must be 16-byte aligned (TMA): offset them by multiples of 8 elements");
  if (a->M <= 0 || a->N <= 0 || a->K <= 0 || a->M > INT32_MAX || a->N > INT32_MAX || a->K > INT32_MAX) {
    snprintf(msg, sizeof msg, "M, N, K must be in 1..2^31-1; got %lld, %lld, %lld", (long long)a->M,
             (long long)a->N, (long long)a->K);
    return fail(why, len, 4, msg);
  }
  if (a->lda < a->K || a->ldb < a->N || a->ldc < a->N || a->lda % kAlign || a->ldb % kAlign || a->ldc % kAlign) {
    snprintf(msg, sizeof msg,
             "leading dimensions must be multiples of 8 elements (16-byte TMA rows) with lda >= K, ldb >= N, "
             "ldc >= N; got lda=%lld ldb=%lld ldc=%lld for K=%lld N=%lld", (long long)a->lda, (long long)a->ldb,
             (long long)a->ldc, (long long)a->K, (long long)a->N);
    return fail(why, len, 5, msg);
  }
  if (a->M % kRowsPerCluster) {
    snprintf(msg, sizeof msg, "M=%lld must be a multiple of %lld (tile M 128 x cluster 2, so the row rotation maps "
             "whole tiles): pad M", (long long)a->M, (long long)kRowsPerCluster);
    return fail(why, len, 6, msg);
  }
  if (a->local_row_begin < 0 || a->local_row_end < a->local_row_begin || a->local_row_end > a->M ||
      a->local_row_begin % kTileM || a->local_row_end % kTileM) {
    snprintf(msg, sizeof msg, "local rows [%lld, %lld) must lie in [0, M=%lld] on multiples of 128 (tile M)",
             (long long)a->local_row_begin, (long long)a->local_row_end, (long long)a->M);
    return fail(why, len, 7, msg);
  }
  if (a->order != CUCO_AG_ORDER_NATURAL && a->order != CUCO_AG_ORDER_LOCAL_FIRST)
    return fail(why, len, 8, "order must be CUCO_AG_ORDER_NATURAL (0) or CUCO_AG_ORDER_LOCAL_FIRST (1)");
  if (a->flags) {
    if (a->rows_per_rank <= 0 || a->chunk_rows <= 0 || a->M % a->rows_per_rank ||
        a->chunks_per_rank < (a->rows_per_rank + a->chunk_rows - 1) / a->chunk_rows) {
      snprintf(msg, sizeof msg, "flag geometry: rows_per_rank=%lld must divide M=%lld, chunk_rows=%lld > 0 and "
               "chunks_per_rank=%d >= ceil(rows_per_rank / chunk_rows)", (long long)a->rows_per_rank,
               (long long)a->M, (long long)a->chunk_rows, a->chunks_per_rank);
      return fail(why, len, 9, msg);
    }
    if ((uintptr_t)a->flags % 4) return fail(why, len, 10, "flags must be 4-byte aligned");
  }
  if (a->config < 0 || a->config >= CUCO_AG_NUM_CONFIGS) {
    snprintf(msg, sizeof msg, "config=%d: pick 0..%d (cuco_ag_gemm_config)", a->config, CUCO_AG_NUM_CONFIGS - 1);
    return fail(why, len, 11, msg);
  }
  if (a->swizzle != 0 && a->swizzle != 1 && a->swizzle != 2 && a->swizzle != 4 && a->swizzle != 8)
    return fail(why, len, 12, "swizzle must be 0, 1, 2, 4 or 8");
  if (a->sm_count < 0 || a->sm_count == 1) return fail(why, len, 13, "sm_count must be 0 (all) or >= 2 (clusters of 2)");
  return 0;
}

extern "C" int cuco_ag_gemm_persistent(const cuco_ag_gemm_args* a, cudaStream_t stream) {
  using namespace cuco_ag_gemm;
  int rc = cuco_ag_gemm_check(a, nullptr, 0);
  if (rc) return rc;
  int sms = a->sm_count;
  if (sms == 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 14;
  }
  switch (a->config) {
    case CUCO_AG_COOP_128x256: return run_coop128x256(a, sms, stream);
    case CUCO_AG_PINGPONG_128x128: return run_pingpong128x128(a, sms, stream);
    default: return 11;
  }
}
