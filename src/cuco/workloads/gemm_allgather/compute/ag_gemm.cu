// Argument checks, dispatch and tuning of cuco_ag_gemm_persistent (no CUTLASS here: this unit compiles in seconds).
#include <stdio.h>

#include <algorithm>
#include <mutex>

#include "ag_gemm.h"

namespace cuco_ag_gemm {
int run_coop128x256(const cuco_ag_gemm_args* a, int sm_count, cudaStream_t s);
int run_pingpong128x128(const cuco_ag_gemm_args* a, int sm_count, cudaStream_t s);

constexpr int64_t kTileM = 128, kRowsPerCluster = 256, kAlign = 8;  // both configs: tile M 128, cluster 2 along M

static int fail(char* why, int len, int code, const char* msg) {
  if (why && len > 0) snprintf(why, (size_t)len, "%s", msg);
  return code;
}

static bool is_swizzle(int s) { return s == 1 || s == 2 || s == 4 || s == 8; }

static int launch(const cuco_ag_gemm_args* a, int sms, cudaStream_t stream) {
  switch (a->config) {
    case CUCO_AG_COOP_128x256: return run_coop128x256(a, sms, stream);
    case CUCO_AG_PINGPONG_128x128: return run_pingpong128x128(a, sms, stream);
    default: return 11;
  }
}

// What cuco_ag_gemm_tune chose, per (M, N, K, SMs, swizzle cap, device); a small ring, most recent kept.
struct Tuned {
  int64_t M, N, K;
  int sms, max_swizzle, device, config, swizzle;
};
constexpr int kTunedEntries = 64;
static std::mutex g_tuned_lock;
static Tuned g_tuned[kTunedEntries];
static int g_tuned_used = 0, g_tuned_next = 0;

// Whether two entries are for the same call (what the choice depends on; not the choice itself).
static bool same_call(const Tuned& a, const Tuned& b) {
  return a.M == b.M && a.N == b.N && a.K == b.K && a.sms == b.sms && a.max_swizzle == b.max_swizzle &&
         a.device == b.device;
}

// The tuned choice for `a` (its swizzle the cap), or ping-pong at the cap when none was measured.
static void tuned_choice(const cuco_ag_gemm_args* a, int sms, int device, int* config, int* swizzle) {
  const int cap = a->swizzle > 0 ? a->swizzle : 1;
  const Tuned call{a->M, a->N, a->K, sms, cap, device, 0, 0};
  *config = CUCO_AG_PINGPONG_128x128, *swizzle = cap;
  std::lock_guard<std::mutex> guard(g_tuned_lock);
  for (int i = 0; i < g_tuned_used; ++i)
    if (same_call(g_tuned[i], call)) *config = g_tuned[i].config, *swizzle = g_tuned[i].swizzle;
}

static void remember(const Tuned& t) {
  std::lock_guard<std::mutex> guard(g_tuned_lock);
  for (int i = 0; i < g_tuned_used; ++i)
    if (same_call(g_tuned[i], t)) {
      g_tuned[i] = t;
      return;
    }
  g_tuned[g_tuned_next] = t;
  g_tuned_next = (g_tuned_next + 1) % kTunedEntries;
  if (g_tuned_used < kTunedEntries) ++g_tuned_used;
}

static int resolve_sms(int sm_count, int* sms, int* device) {
  if (cudaGetDevice(device) != cudaSuccess) return 14;
  *sms = sm_count;
  if (*sms == 0 && cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, *device) != cudaSuccess) return 14;
  return 0;
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
  if (a->config != CUCO_AG_TUNED && (a->config < 0 || a->config >= CUCO_AG_NUM_CONFIGS)) {
    snprintf(msg, sizeof msg, "config=%d: pick 0..%d or CUCO_AG_TUNED (cuco_ag_gemm_config)", a->config,
             CUCO_AG_NUM_CONFIGS - 1);
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
  int sms = a->sm_count, device = 0;
  if (sms == 0 || a->config == CUCO_AG_TUNED) {
    if ((rc = resolve_sms(a->sm_count, &sms, &device))) return rc;
  }
  if (a->config != CUCO_AG_TUNED) return launch(a, sms, stream);
  cuco_ag_gemm_args chosen = *a;
  tuned_choice(a, sms, device, &chosen.config, &chosen.swizzle);
  return launch(&chosen, sms, stream);
}

extern "C" int cuco_ag_gemm_tune(const cuco_ag_gemm_args* a, int max_swizzle, cudaStream_t stream, int* config,
                                 int* swizzle) {
  using namespace cuco_ag_gemm;
  if (!is_swizzle(max_swizzle)) return 16;
  if (!a) return cuco_ag_gemm_check(a, nullptr, 0);
  cuco_ag_gemm_args t = *a;
  t.flags = nullptr, t.epoch_at = nullptr;  // nothing waits: the GEMM's own speed
  t.config = CUCO_AG_COOP_128x256, t.swizzle = max_swizzle;
  int rc = cuco_ag_gemm_check(&t, nullptr, 0);
  if (rc) return rc;
  int sms = 0, device = 0;
  if ((rc = resolve_sms(a->sm_count, &sms, &device))) return rc;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) rc = 17;
  // Every (configuration, swizzle) timed one launch at a time, each after the stream has drained (as a caller's
  // launch meets the GPU, not at the clocks of a long run of back-to-back GEMMs), in rounds whose order turns, the
  // median of each one's samples; the first launch of each is untimed (it builds the parameters, loads the kernel).
  constexpr int kRounds = 3, kReps = 2, kVariants = CUCO_AG_NUM_CONFIGS * 4;
  float samples[kVariants][kRounds * kReps];
  int nvar = 0, var_cfg[kVariants], var_sw[kVariants];
  for (int cfg = 0; cfg < CUCO_AG_NUM_CONFIGS; ++cfg)
    for (int sw = 1; sw <= max_swizzle; sw *= 2) var_cfg[nvar] = cfg, var_sw[nvar] = sw, ++nvar;
  for (int v = 0; v < nvar && !rc; ++v) {
    t.config = var_cfg[v], t.swizzle = var_sw[v];
    rc = launch(&t, sms, stream);
  }
  for (int round = 0; round < kRounds && !rc; ++round)
    for (int j = 0; j < nvar && !rc; ++j) {
      const int v = round % 2 ? nvar - 1 - j : j;
      t.config = var_cfg[v], t.swizzle = var_sw[v];
      for (int r = 0; r < kReps && !rc; ++r) {
        float ms = 0;
        if (cudaStreamSynchronize(stream) != cudaSuccess || cudaEventRecord(e0, stream) != cudaSuccess) rc = 17;
        if (!rc) rc = launch(&t, sms, stream);
        if (!rc && (cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                    cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess))
          rc = 17;
        samples[v][round * kReps + r] = ms;
      }
    }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (rc) return rc;
  Tuned pick{a->M, a->N, a->K, sms, max_swizzle, device, CUCO_AG_PINGPONG_128x128, max_swizzle};
  float fastest = 3.4e38f;
  for (int v = 0; v < nvar; ++v) {
    float* x = samples[v];
    std::sort(x, x + kRounds * kReps);
    const float median = 0.5f * (x[(kRounds * kReps - 1) / 2] + x[kRounds * kReps / 2]);
    if (median < fastest) fastest = median, pick.config = var_cfg[v], pick.swizzle = var_sw[v];
  }
  remember(pick);
  if (config) *config = pick.config;
  if (swizzle) *swizzle = pick.swizzle;
  return 0;
}
