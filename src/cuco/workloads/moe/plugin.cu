// Harness plugin of the MoE workload (DeepSeek-V3-style layer: dispatch -> expert FFN -> gate-weighted combine).
//
// dims = T (tokens per rank), H (hidden), I (expert FFN size), E (experts), K (top-k), R (skew ratio).
// Rank r holds T tokens X_r (T x H bf16), their routing (experts and gates, T x K, seeded: routing.h) and the
// weights of its E/W experts. Output Y_r[t] = sum_k gate[t,k] * FFN_{expert[t,k]}(X_r[t]) with
// FFN_e(x) = (silu(x W1g_e^T) * (x W1u_e^T)) W2_e^T.
//
// Buffers (moe_dev.cuh's order): 0 X (symmetric input), 1 experts (int32 input), 2 gates (fp32 input),
// 3 W1 (E/W x 2I x H), 4 W2 (E/W x H x I), 5 Y (T x H output), 6 pub (symmetric scratch), 7 work (scratch).
//
// The check never trusts anything a candidate can write: it verifies that the inputs are still the seeded ones,
// regenerates each expert's weights from the seed, and computes Y in fp32 with its own SIMT kernels, expert by
// expert over this rank's slots (routing regenerated on the host).
//
// Tolerance (one for every candidate: the plugin does not know the point's dispatch dtype). bf16 dispatch
// rounds h, act, the expert outputs and Y to bf16 (relative 2^-9 each): per-token relative L2 error ~0.5%.
// fp8 dispatch (e4m3, 3 mantissa bits, one scale per 128 channels, dequantised to bf16 on receive) adds a
// relative input error of rms ~2.7% that goes through both GEMMs: per-token error ~4%. The bound is 12% per
// token (3x the fp8 figure) and 6% overall. A dropped slot or a wrong gate moves its token by
// gate * |y_k| / |Y| (>= ~25% at top-2, ~18% at top-8 with gates in [0.5, 1.5) / sum), so it fails.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuco/abi.h"
#include "cuco/compute/moe.h"
#include "cuco/gen.cuh"
#include "cuco/kit/plugin.cuh"
#include "moe_rows.cuh"  // and moe_dev.cuh
#include "reference.cuh"
#include "routing.h"

namespace {

using namespace cuco_moe;
using namespace cuco_moe_ref;
constexpr double kTokenTol = 0.12, kGlobalTol = 0.06;

// Weights are uniform values times 2^-s with 2^s ~ sqrt(fan-in): exact in bf16, and activations stay O(1).
float weight_scale(int64_t fan_in) { return ldexpf(1.0f, -(int)floor(log2(sqrt((double)fan_in)))); }

struct State {
  Geo g;
  PubLayout P;
  WorkLayout L;
  cuco_moe_ffn* ffn = nullptr;
  int32_t* d_rows = nullptr;  // compute part: this rank's groups (one per local expert)
  int64_t* d_off = nullptr;
  int32_t* d_exp = nullptr;
  std::vector<size_t> send_rows, recv_rows;  // comm part: rows to / from each rank
  int64_t received = 0;
  ~State() {
    cuco_moe_ffn_destroy(ffn);
    cudaFree(d_rows);
    cudaFree(d_off);
    cudaFree(d_exp);
  }
};

char* pub(cuco_ctx* ctx) { return (char*)ctx->buffers[BUF_PUB].ptr; }
char* work(cuco_ctx* ctx) { return (char*)ctx->buffers[BUF_WORK].ptr; }

// Host routing of every rank: experts (and gates) of source p.
void route_of(const Geo& g, uint64_t seed, int p, std::vector<int32_t>& ex, std::vector<float>& gt) {
  ex.resize((size_t)g.slots);
  gt.resize((size_t)g.slots);
  cuco_moe::route(g.T, g.E, g.K, g.R, seed, p, ex.data(), gt.data());
}

int part_compute(cuco_ctx* ctx, State& s) {
  return cuco_moe_ffn_run(s.ffn, (int)s.g.El, pub(ctx) + s.P.recv, ctx->buffers[BUF_W1].ptr,
                          ctx->buffers[BUF_W2].ptr, work(ctx) + s.L.h1, work(ctx) + s.L.act,
                          pub(ctx) + s.P.yrows, s.d_rows, s.d_off, s.d_exp, ctx->stream);
}

// Dispatch and combine alone, the host way: AlltoAllv of the token rows there and back (grouped send/recv).
int part_comm(cuco_ctx* ctx, State& s) {
  const size_t row = (size_t)s.g.H;
  __nv_bfloat16* a = (__nv_bfloat16*)(pub(ctx) + s.P.yrows);
  __nv_bfloat16* b = (__nv_bfloat16*)(pub(ctx) + s.P.recv);
  for (int dir = 0; dir < 2; ++dir) {
    size_t so = 0, ro = 0;
    if (ncclGroupStart() != ncclSuccess) return 200;
    for (int q = 0; q < ctx->world; ++q) {
      const size_t sn = dir ? s.recv_rows[q] : s.send_rows[q], rn = dir ? s.send_rows[q] : s.recv_rows[q];
      if (sn && ncclSend((dir ? b : a) + so * row, sn * row, ncclBfloat16, q, ctx->comm, ctx->stream) != ncclSuccess)
        return 201;
      if (rn && ncclRecv((dir ? a : b) + ro * row, rn * row, ncclBfloat16, q, ctx->comm, ctx->stream) != ncclSuccess)
        return 202;
      so += sn, ro += rn;
    }
    if (ncclGroupEnd() != ncclSuccess) return 203;
  }
  return 0;
}

const char* refuse(const int64_t* d, int world) {
  static char buf[200];
  const int64_t T = d[0], H = d[1], I = d[2], E = d[3], K = d[4], R = d[5];
  if (world < 1 || world > kMaxWorld) return "the world size must be between 1 and 72 (one NVLink domain)";
  if (T < 1 || T * K >= (1ll << 31)) return "T (tokens per rank) must be >= 1 with T*K < 2^31";
  if (H < 128 || H % 128) return "H must be a positive multiple of 128 (fp8 block scales, 16-byte rows)";
  if (I < 64 || I % 64) return "I must be a positive multiple of 64 (GEMM tiles)";
  if (E < 1 || E > kMaxExperts || E % world) {
    snprintf(buf, sizeof buf, "E=%lld must be a multiple of the world size %d (and <= %d)", (long long)E, world,
             kMaxExperts);
    return buf;
  }
  if (K < 1 || K > E) return "top-k must be between 1 and E";
  if (R < 1) return "the skew ratio r must be >= 1";
  if (T * K * R / (R + E - 1) > T) return "top-k*r must be <= r+E-1 (expert 0 can take each token once)";
  return nullptr;
}

cuco::kit::Buffers buffers(const int64_t* dims, int world) {
  const Geo g = geo_make(dims, world, 0);
  return {{
      {"X", (size_t)(g.T * g.H * 2), 1, CUCO_BUF_INPUT},
      {"experts", (size_t)(g.slots * 4), 0, CUCO_BUF_INPUT},
      {"gates", (size_t)(g.slots * 4), 0, CUCO_BUF_INPUT},
      {"W1", (size_t)(g.El * 2 * g.I * g.H * 2), 0, CUCO_BUF_INPUT},
      {"W2", (size_t)(g.El * g.H * g.I * 2), 0, CUCO_BUF_INPUT},
      {"Y", (size_t)(g.T * g.H * 2), 0, CUCO_BUF_OUTPUT},
      {"pub", (size_t)pub_layout(g).bytes, 1, CUCO_BUF_SCRATCH},
      {"work", (size_t)work_layout(g).bytes, 0, CUCO_BUF_SCRATCH},
  }};
}

int setup(cuco_ctx* ctx, State& s) {
  s.g = geo_make(ctx->dims, ctx->world, ctx->rank);
  s.P = pub_layout(s.g);
  s.L = work_layout(s.g);
  int rc = cuco_moe_ffn_create(&s.ffn, (int)s.g.El, s.g.H, s.g.I, 0);
  if (rc) return 300 + rc;
  CUCO_PLUGIN_CUDA(cudaMalloc(&s.d_rows, 4 * s.g.El));
  CUCO_PLUGIN_CUDA(cudaMalloc(&s.d_off, 8 * s.g.El));
  CUCO_PLUGIN_CUDA(cudaMalloc(&s.d_exp, 4 * s.g.El));
  return 0;
}

int fill(cuco_ctx* ctx, State& s, uint64_t seed) {
  const Geo& g = s.g;
  cudaStream_t st = ctx->stream;
  CUCO_PLUGIN_CUDA(cuco::gen_fill_bf16((__nv_bfloat16*)ctx->buffers[BUF_X].ptr, (uint64_t)(g.T * g.H), seed, ctx->rank,
                                       GEN_X, st));
  gen_scaled_bf16<<<2048, 256, 0, st>>>((__nv_bfloat16*)ctx->buffers[BUF_W1].ptr, (uint64_t)(g.El * 2 * g.I * g.H),
                                        seed, ctx->rank, GEN_W1, 0, weight_scale(g.H));
  gen_scaled_bf16<<<2048, 256, 0, st>>>((__nv_bfloat16*)ctx->buffers[BUF_W2].ptr, (uint64_t)(g.El * g.H * g.I),
                                        seed, ctx->rank, GEN_W2, 0, weight_scale(g.I));
  CUCO_PLUGIN_CUDA(cudaGetLastError());
  // Routing of every rank: ours into the input buffers; all of them for the parts' tables and received rows.
  std::vector<std::vector<int32_t>> ex(g.W);
  std::vector<float> gt;
  std::vector<int32_t> mine_gates_dummy;
  for (int p = 0; p < g.W; ++p) {
    route_of(g, seed, p, ex[p], gt);
    if (p == ctx->rank) {
      CUCO_PLUGIN_CUDA(
          cudaMemcpyAsync(ctx->buffers[BUF_EXPERT].ptr, ex[p].data(), 4 * g.slots, cudaMemcpyHostToDevice, st));
      CUCO_PLUGIN_CUDA(cudaMemcpyAsync(ctx->buffers[BUF_GATE].ptr, gt.data(), 4 * g.slots, cudaMemcpyHostToDevice, st));
      CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));  // the host vectors are reused
    }
  }
  std::vector<int32_t> rows(g.El, 0);
  std::vector<int64_t> off(g.El, 0), rowmap;
  std::vector<int32_t> exps(g.El);
  s.send_rows.assign(g.W, 0);
  s.recv_rows.assign(g.W, 0);
  for (int64_t e = 0; e < g.El; ++e) {
    exps[e] = (int32_t)e;
    off[e] = (int64_t)rowmap.size();
    const int64_t ge = ctx->rank * g.El + e;
    for (int i = 0; i < g.W; ++i) {  // own tokens first, as candidates lay them out (the rows are the same set)
      const int p = (ctx->rank + i) % g.W;
      for (int64_t j = 0; j < g.slots; ++j)
        if (ex[p][j] == ge) rowmap.push_back(((int64_t)p << 32) | j), ++rows[e], ++s.recv_rows[p];
    }
  }
  for (int64_t j = 0; j < g.slots; ++j) ++s.send_rows[ex[ctx->rank][j] / g.El];
  s.received = (int64_t)rowmap.size();
  if (s.received > g.rows_cap) return 400;  // rows_bound() is wrong: never expected
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(s.d_rows, rows.data(), 4 * g.El, cudaMemcpyHostToDevice, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(s.d_off, off.data(), 8 * g.El, cudaMemcpyHostToDevice, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(s.d_exp, exps.data(), 4 * g.El, cudaMemcpyHostToDevice, st));
  int64_t* d_map = nullptr;
  if (s.received) {
    CUCO_PLUGIN_CUDA(cudaMalloc(&d_map, 8 * s.received));
    CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d_map, rowmap.data(), 8 * s.received, cudaMemcpyHostToDevice, st));
    gen_rows<<<2048, 256, 0, st>>>((__nv_bfloat16*)(pub(ctx) + s.P.recv), d_map, s.received, g.H, g.K, seed);
    CUCO_PLUGIN_CUDA(cudaGetLastError());
  }
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  cudaFree(d_map);
  return 0;
}

int check(cuco_ctx* ctx, State& s, uint64_t seed, cuco_check_result* out) {
  const Geo& g = s.g;
  cudaStream_t st = ctx->stream;
  // 1. The inputs are still the seeded ones (a candidate that rewrites its inputs cannot pass).
  std::vector<int32_t> ex;
  std::vector<float> gt;
  route_of(g, seed, ctx->rank, ex, gt);
  std::vector<int32_t> ex_dev(g.slots);
  std::vector<float> gt_dev(g.slots);
  CUCO_PLUGIN_CUDA(cudaMemcpy(ex_dev.data(), ctx->buffers[BUF_EXPERT].ptr, 4 * g.slots, cudaMemcpyDeviceToHost));
  CUCO_PLUGIN_CUDA(cudaMemcpy(gt_dev.data(), ctx->buffers[BUF_GATE].ptr, 4 * g.slots, cudaMemcpyDeviceToHost));
  unsigned long long* d_bad = nullptr;
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_bad, 8));
  CUCO_PLUGIN_CUDA(cudaMemsetAsync(d_bad, 0, 8, st));
  count_changed<<<1024, 256, 0, st>>>((const __nv_bfloat16*)ctx->buffers[BUF_X].ptr, g.T * g.H, seed, ctx->rank,
                                      GEN_X, 1.0f, d_bad);
  count_changed<<<2048, 256, 0, st>>>((const __nv_bfloat16*)ctx->buffers[BUF_W1].ptr, g.El * 2 * g.I * g.H, seed,
                                      ctx->rank, GEN_W1, weight_scale(g.H), d_bad);
  count_changed<<<2048, 256, 0, st>>>((const __nv_bfloat16*)ctx->buffers[BUF_W2].ptr, g.El * g.H * g.I, seed,
                                      ctx->rank, GEN_W2, weight_scale(g.I), d_bad);
  unsigned long long changed = 0;
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(&changed, d_bad, 8, cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  cudaFree(d_bad);
  if (changed || memcmp(ex.data(), ex_dev.data(), 4 * g.slots) || memcmp(gt.data(), gt_dev.data(), 4 * g.slots)) {
    out->passed = 0;
    snprintf(out->message, sizeof(out->message),
             "the candidate changed its inputs (%llu token/weight elements, routing %s): inputs are read-only",
             changed, memcmp(ex.data(), ex_dev.data(), 4 * g.slots) ? "changed" : "intact");
    return 0;
  }
  // 2. fp32 reference, expert by expert over this rank's slots, weights regenerated from the seed.
  float *yref = nullptr, *h = nullptr, *act = nullptr, *o = nullptr, *d_gate = nullptr;
  __nv_bfloat16 *w1 = nullptr, *w2 = nullptr;
  int32_t *d_tok = nullptr;
  double *tok_err = nullptr, *tok_ref = nullptr;
  unsigned long long* d_nan = nullptr;
  float* d_max = nullptr;
  CUCO_PLUGIN_CUDA(cudaMalloc(&yref, 4 * g.T * g.H));
  CUCO_PLUGIN_CUDA(cudaMalloc(&h, 4 * g.T * 2 * g.I));
  CUCO_PLUGIN_CUDA(cudaMalloc(&act, 4 * g.T * g.I));
  CUCO_PLUGIN_CUDA(cudaMalloc(&o, 4 * g.T * g.H));
  CUCO_PLUGIN_CUDA(cudaMalloc(&w1, 2 * 2 * g.I * g.H));
  CUCO_PLUGIN_CUDA(cudaMalloc(&w2, 2 * g.H * g.I));
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_tok, 4 * g.T));
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_gate, 4 * g.T));
  CUCO_PLUGIN_CUDA(cudaMalloc(&tok_err, 8 * g.T));
  CUCO_PLUGIN_CUDA(cudaMalloc(&tok_ref, 8 * g.T));
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_nan, 8));
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_max, 4));
  CUCO_PLUGIN_CUDA(cudaMemsetAsync(yref, 0, 4 * g.T * g.H, st));
  CUCO_PLUGIN_CUDA(cudaMemsetAsync(d_nan, 0, 8, st));
  CUCO_PLUGIN_CUDA(cudaMemsetAsync(d_max, 0, 4, st));
  std::vector<std::vector<int32_t>> toks(g.E);
  std::vector<std::vector<float>> gates(g.E);
  for (int64_t j = 0; j < g.slots; ++j) toks[ex[j]].push_back((int32_t)(j / g.K)), gates[ex[j]].push_back(gt[j]);
  const __nv_bfloat16* x = (const __nv_bfloat16*)ctx->buffers[BUF_X].ptr;
  for (int64_t e = 0; e < g.E; ++e) {
    const int M = (int)toks[e].size();
    if (!M) continue;
    const int q = (int)(e / g.El);
    const int64_t le = e % g.El;
    gen_scaled_bf16<<<1024, 256, 0, st>>>(w1, (uint64_t)(2 * g.I * g.H), seed, q, GEN_W1,
                                          (uint64_t)(le * 2 * g.I * g.H), weight_scale(g.H));
    gen_scaled_bf16<<<1024, 256, 0, st>>>(w2, (uint64_t)(g.H * g.I), seed, q, GEN_W2, (uint64_t)(le * g.H * g.I),
                                          weight_scale(g.I));
    CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d_tok, toks[e].data(), 4 * M, cudaMemcpyHostToDevice, st));
    CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d_gate, gates[e].data(), 4 * M, cudaMemcpyHostToDevice, st));
    ref_gemm<__nv_bfloat16><<<dim3((unsigned)((2 * g.I + 63) / 64), (M + 63) / 64), 256, 0, st>>>(
        x, d_tok, M, w1, (int)(2 * g.I), (int)g.H, h);
    ref_swiglu<<<1024, 256, 0, st>>>(h, M, g.I, act);
    ref_gemm<float><<<dim3((unsigned)((g.H + 63) / 64), (M + 63) / 64), 256, 0, st>>>(act, nullptr, M, w2, (int)g.H,
                                                                                      (int)g.I, o);
    ref_accumulate<<<1024, 256, 0, st>>>(o, d_tok, d_gate, M, g.H, yref);
    CUCO_PLUGIN_CUDA(cudaGetLastError());
    CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));  // the host vectors of this expert are reused as sources
  }
  // 3. Compare per token.
  compare_tokens<<<1024, 256, 0, st>>>((const __nv_bfloat16*)ctx->buffers[BUF_Y].ptr, yref, g.T, g.H, tok_err,
                                       tok_ref, d_nan, d_max);
  std::vector<double> te(g.T), tr(g.T);
  unsigned long long nnan = 0;
  float mx = 0;
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(te.data(), tok_err, 8 * g.T, cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(tr.data(), tok_ref, 8 * g.T, cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(&nnan, d_nan, 8, cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(&mx, d_max, 4, cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  for (void* p : {(void*)yref, (void*)h, (void*)act, (void*)o, (void*)w1, (void*)w2, (void*)d_tok, (void*)d_gate,
                  (void*)tok_err, (void*)tok_ref, (void*)d_nan, (void*)d_max})
    cudaFree(p);
  double se = 0, sr = 0, worst = 0;
  int64_t bad_tokens = 0, worst_t = -1;
  for (int64_t t = 0; t < g.T; ++t) {
    se += te[t], sr += tr[t];
    const double rel = tr[t] > 0 ? sqrt(te[t] / tr[t]) : (te[t] > 0 ? INFINITY : 0.0);
    if (rel > kTokenTol) ++bad_tokens;
    if (rel > worst) worst = rel, worst_t = t;
  }
  out->n_checked = g.T * g.H;
  out->n_nan = (int64_t)nnan;
  out->n_bad = bad_tokens * g.H;
  out->rel_l2_err = sr > 0 ? sqrt(se / sr) : (se > 0 ? INFINITY : 0.0);
  out->max_abs_err = mx;
  out->passed = nnan == 0 && bad_tokens == 0 && out->rel_l2_err < kGlobalTol;
  snprintf(out->message, sizeof(out->message),
           "%s: rel_l2=%.3g, %lld of %lld tokens off by more than %.2g (worst %.3g at token %lld), nan/inf=%llu "
           "(pass: no nan, every token within %.2g, rel_l2 < %.2g; inputs intact)",
           out->passed ? "PASS" : "FAIL", out->rel_l2_err, (long long)bad_tokens, (long long)g.T, kTokenTol, worst,
           (long long)worst_t, nnan, kTokenTol, kGlobalTol);
  return 0;
}

constexpr cuco::kit::WorkloadPlugin<State> kPlugin = {
    "moe takes 6 dims T,H,I,E,K,R", 6, NBUF, refuse, buffers, setup, fill, check, part_compute, part_comm};

}  // namespace

CUCO_WORKLOAD_PLUGIN(kPlugin)
