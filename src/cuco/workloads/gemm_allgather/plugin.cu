// Harness plugin of the GEMM+AllGather workload (tensor-parallel column-parallel linear, sequence-sharded input).
//
// Rank r holds A_r (M/W x K, bf16, row-major) and its weight shard B_r (K x N, bf16, row-major) and computes
// C_r = AllGather(A) . B_r (M x N, bf16, fp32 accumulate). Row block p of the gathered A comes from rank p.
//
// Buffers (in this order; candidates index ctx->buffers with the same numbers):
//   0 A_local  symmetric input   (M/W x K)  peers pull from it through LSA
//   1 B        input             (K x N)
//   2 C        output            (M x N)
//   3 A_full   symmetric scratch (M x K)    gathered input; symmetric so that push (put) designs can write it
//
// The check never reads anything a candidate wrote except C: it regenerates every rank's A_p and its own B from
// the seed on this device, multiplies them with cuBLASLt into fp32, spot-checks that reference on the CPU in
// fp64, and compares C with it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuco/abi.h"
#include "cuco/gen.cuh"
#include "cuco/kit/check.cuh"
#include "cuco/kit/plugin.cuh"
#include "lt_gemm.cuh"

namespace {

enum { BUF_A_LOCAL = 0, BUF_B = 1, BUF_C = 2, BUF_A_FULL = 3, NBUF = 4 };
enum { GEN_A = 0, GEN_B = 1 };  // generator buffer ids (rank of the owner, buffer id)

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kSpotSamples = 48;

struct State {
  int64_t M = 0, K = 0, N = 0, Mr = 0;
  cuco_ag::LtGemm full;  // bf16 output, all SMs: the "compute" part
  cuco_ag::LtGemm ref;   // fp32 output: the reference
  void* ws = nullptr;
  cublasLtHandle_t lt = nullptr;  // this plugin's own handle: the harness links no compute library
  ~State() {
    cuco_ag::lt_gemm_destroy(&full);
    cuco_ag::lt_gemm_destroy(&ref);
    if (ws) cudaFree(ws);
    if (lt) cublasLtDestroy(lt);
  }
};

int part_compute(cuco_ctx* ctx, State& s) {
  return cuco_ag::lt_gemm_run(s.lt, &s.full, ctx->buffers[BUF_A_FULL].ptr, ctx->buffers[BUF_B].ptr,
                              ctx->buffers[BUF_C].ptr, s.ws, ctx->stream);
}

int part_comm(cuco_ctx* ctx, State& s) {
  ncclResult_t r = ncclAllGather(ctx->buffers[BUF_A_LOCAL].ptr, ctx->buffers[BUF_A_FULL].ptr,
                                 (size_t)(s.Mr * s.K), ncclBfloat16, ctx->comm, ctx->stream);
  return r == ncclSuccess ? 0 : 200 + (int)r;
}

const char* refuse(const int64_t* dims, int world) {
  static char why[200];
  const int64_t M = dims[0], K = dims[1], N = dims[2];
  if (world < 1 || M <= 0 || K <= 0 || N <= 0 || M % world) {
    snprintf(why, sizeof why, "M=%lld must be a positive multiple of the world size %d", (long long)M, world);
    return why;
  }
  if ((M / world) % 128 || K % 64 || N % 128) {
    snprintf(why, sizeof why,
             "need M/world %% 128 == 0, K %% 64 == 0, N %% 128 == 0 (got M/world=%lld K=%lld N=%lld)",
             (long long)(M / world), (long long)K, (long long)N);
    return why;
  }
  return nullptr;
}

cuco::kit::Buffers buffers(const int64_t* dims, int world) {
  const int64_t M = dims[0], K = dims[1], N = dims[2];
  const size_t e = 2;  // bf16
  return {{
      {"A_local", (size_t)(M / world) * K * e, 1, CUCO_BUF_INPUT},
      {"B", (size_t)K * N * e, 0, CUCO_BUF_INPUT},
      {"C", (size_t)M * N * e, 0, CUCO_BUF_OUTPUT},
      {"A_full", (size_t)M * K * e, 1, CUCO_BUF_SCRATCH},
  }};
}

int setup(cuco_ctx* ctx, State& s) {
  s.M = ctx->dims[0];
  s.K = ctx->dims[1];
  s.N = ctx->dims[2];
  s.Mr = s.M / ctx->world;
  CUCO_PLUGIN_CUDA(cudaMalloc(&s.ws, kWorkspaceBytes));
  if (cublasLtCreate(&s.lt) != CUBLAS_STATUS_SUCCESS) return 200;
  int rc = cuco_ag::lt_gemm_plan(s.lt, &s.full, s.M, s.K, s.N, CUDA_R_16BF, kWorkspaceBytes, 0);
  if (rc) return 300 + rc;
  rc = cuco_ag::lt_gemm_plan(s.lt, &s.ref, s.M, s.K, s.N, CUDA_R_32F, kWorkspaceBytes, 0);
  if (rc) return 400 + rc;
  return 0;
}

int fill(cuco_ctx* ctx, State& s, uint64_t seed) {
  CUCO_PLUGIN_CUDA(cuco::gen_fill_bf16((__nv_bfloat16*)ctx->buffers[BUF_A_LOCAL].ptr, (uint64_t)(s.Mr * s.K), seed,
                                       ctx->rank, GEN_A, ctx->stream));
  CUCO_PLUGIN_CUDA(cuco::gen_fill_bf16((__nv_bfloat16*)ctx->buffers[BUF_B].ptr, (uint64_t)(s.K * s.N), seed, ctx->rank,
                                       GEN_B, ctx->stream));
  return 0;
}

int check(cuco_ctx* ctx, State& s, uint64_t seed, cuco_check_result* out) {
  const int64_t M = s.M, K = s.K, N = s.N, Mr = s.Mr;
  cudaStream_t st = ctx->stream;
  __nv_bfloat16 *a = nullptr, *b = nullptr;
  float* r = nullptr;
  cuco::kit::CompareStats* dstats = nullptr;
  CUCO_PLUGIN_CUDA(cudaMalloc(&a, (size_t)M * K * 2));
  CUCO_PLUGIN_CUDA(cudaMalloc(&b, (size_t)K * N * 2));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r, (size_t)M * N * 4));
  CUCO_PLUGIN_CUDA(cudaMalloc(&dstats, sizeof(*dstats)));
  // Every rank's A_p and this rank's B, regenerated from the seed: no communication, nothing the candidate wrote.
  for (int p = 0; p < ctx->world; ++p)
    CUCO_PLUGIN_CUDA(cuco::gen_fill_bf16(a + (size_t)p * Mr * K, (uint64_t)(Mr * K), seed, p, GEN_A, st));
  CUCO_PLUGIN_CUDA(cuco::gen_fill_bf16(b, (uint64_t)(K * N), seed, ctx->rank, GEN_B, st));
  int rc = cuco_ag::lt_gemm_run(s.lt, &s.ref, a, b, r, s.ws, st);
  if (rc) {
    snprintf(out->message, sizeof(out->message), "reference GEMM failed (cuBLASLt status %d)", rc);
    return 500 + rc;
  }
  const size_t n = (size_t)M * N;
  const __nv_bfloat16* c = (const __nv_bfloat16*)ctx->buffers[BUF_C].ptr;
  // bf16 output of an fp32-accumulated GEMM against an fp32 reference: |c - r| <= 1e-2 (|r| + rms(r)).
  CUCO_PLUGIN_CUDA(cuco::kit::compare_bf16(c, r, n, 1e-2f, 1e-2, dstats, st));
  cuco::kit::CompareStats h;
  // Sampled reference entries for the fp64 spot check.
  std::vector<int64_t> rows(kSpotSamples), cols(kSpotSamples);
  std::vector<float> refv(kSpotSamples);
  for (int i = 0; i < kSpotSamples; ++i) {
    uint64_t hsh = cuco::splitmix64(seed * 7919u + (uint64_t)i * 104729u + (uint64_t)ctx->rank);
    rows[i] = (int64_t)(hsh % (uint64_t)M);
    cols[i] = (int64_t)((hsh >> 32) % (uint64_t)N);
    CUCO_PLUGIN_CUDA(cudaMemcpyAsync(&refv[i], r + rows[i] * N + cols[i], 4, cudaMemcpyDeviceToHost, st));
  }
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(&h, dstats, sizeof(h), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  cudaFree(a);
  cudaFree(b);
  cudaFree(r);
  cudaFree(dstats);

  int spot_bad = 0;
  double spot_worst = 0;
  for (int i = 0; i < kSpotSamples; ++i) {
    const int64_t row = rows[i], col = cols[i];
    const int p = (int)(row / Mr);
    const int64_t lr = row % Mr;
    double exact = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      double av = cuco::gen_value(seed, p, GEN_A, (uint64_t)(lr * K + k));
      double bv = cuco::gen_value(seed, ctx->rank, GEN_B, (uint64_t)(k * N + col));
      exact += av * bv;
      mag += fabs(av * bv);
    }
    double err = fabs((double)refv[i] - exact);
    spot_worst = fmax(spot_worst, err / (mag + 1e-30));
    if (err > 1e-3 * mag + 1e-5) ++spot_bad;
  }

  cuco::kit::fill_check(h, n, out);
  if (spot_bad) {
    out->passed = 0;
    snprintf(out->message, sizeof(out->message),
             "reference rejected: %d of %d fp64 spot checks disagree with the cuBLASLt reference (worst %.3g of "
             "sum|a*b|)",
             spot_bad, kSpotSamples, spot_worst);
    return 0;
  }
  out->passed = (h.nnan == 0 && h.nbad == 0 && out->rel_l2_err < 1e-2) ? 1 : 0;
  snprintf(out->message, sizeof(out->message),
           "%s: rel_l2=%.3g max_abs=%.3g nan/inf=%lld bad=%lld of %lld (pass: rel_l2<1e-2, no nan, |c-r|<=1e-2(|r|+rms)); "
           "fp64 spot check ok (%d samples)",
           out->passed ? "PASS" : "FAIL", out->rel_l2_err, out->max_abs_err, (long long)h.nnan, (long long)h.nbad,
           (long long)n, kSpotSamples);
  return 0;
}

constexpr cuco::kit::WorkloadPlugin<State> kPlugin = {
    "gemm_allgather takes 3 dims M,K,N", 3, NBUF, refuse, buffers, setup, fill, check, part_compute, part_comm};

}  // namespace

CUCO_WORKLOAD_PLUGIN(kPlugin)
