// Harness plugin of the KV-transfer workload (disaggregated serving: prefill -> decode KV cache transfer).
//
// dims = S (prompt tokens), KV (KV width = 128 x KV heads), L (layers). Ranks pair up: rank 2p prefills, rank 2p+1
// decodes (W = 1: rank 0 does both). A prefill rank runs L Llama-3-8B-like layers over its prompt X0 (compute
// library, cuco/compute/kv_transfer.h; one weight set shared by all layers) and writes each layer's K and V into its
// paged cache under its own block table; its decode rank must end with the same K and V in its own paged cache under
// its own block table (both tables are seeded random injective maps into a pool of pages).
//
// Buffers (kv_layout.cuh's layouts; candidates index ctx->buffers with the same numbers):
//   0 X0      input   [S x 4096] bf16             this rank's prompt hidden states (generated with its rank)
//   1 W       input   Wqkv | Wo | Wgu | Wd bf16   one weight set for every layer and rank (cuco_kvt_weight_offsets)
//   2 tables  input   int32 [2 x S/16], symmetric prefill table, then decode table (peers read a decode table)
//   3 pcache  scratch [L][2][pool][16][KV], symm. the prefill side's paged cache
//   4 dcache  output  [L][2][pool][16][KV], symm. the decode side's paged cache: what is checked
//   5 stage   scratch [L][2][S][KV], symmetric    a layer's K/V in token order (staged protocols, host seed)
//
// The check (decode ranks) trusts nothing a candidate wrote: it regenerates the prefill peer's prompt, the weights
// and both tables from the seed, runs the layer stack itself (its own cuBLASLt plans with fp32 outputs, rounded to
// bf16 where the compute library rounds, and its own SIMT attention: reference.cuh), and compares every logical
// block page by page through the decode block table.
//
// Tolerance: the reference rounds at the same points as the compute library, so the two differ only by fp32
// accumulation order (GEMM algorithms, the FMHA's online softmax), i.e. a flipped last bf16 bit (2^-8 relative) on
// some elements, growing like a random walk through the layers' residual stream: ~0.5% per block at 3 layers,
// a few % at 32. A block passes within 8% relative L2 and the whole cache within 4%; a skipped block is poison
// (NaN, all bytes 0xFF), and a block in the wrong page, stale from another seed or from another layer is off by
// ~140%, so each fails by a wide margin.
//
// The cache is then consumed as the decode rank would: per layer, the decode step's attention (the last prompt
// token's query, every query head, over all S tokens) reading K and V through the decode block table from the
// received pages, against the same attention over the reference K/V in token order; its outputs, all layers
// together, must agree within 4% relative L2 with no NaN (reference.cuh: decode_attention).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cuco/abi.h"
#include "cuco/compute/kv_transfer.h"
#include "cuco/kit/compute/lt_gemm.cuh"
#include "cuco/kit/plugin.cuh"
#include "kv_layout.cuh"
#include "reference.cuh"

namespace {

using namespace cuco_kv;
using namespace cuco_kv_ref;
using cuco_lt::LtGemm;
enum { BUF_X = 0, BUF_W = 1, BUF_TABLES = 2, BUF_PCACHE = 3, BUF_DCACHE = 4, BUF_STAGE = 5, NBUF = 6 };
constexpr int64_t H = CUCO_KVT_HIDDEN, F = CUCO_KVT_MLP;
constexpr double kBlockTol = 0.08, kGlobalTol = 0.04;
constexpr size_t kLtWorkspace = 32u << 20;

struct State {
  Geo g;
  int role = 0;
  int64_t qw = 0, ld = 0, woff[4] = {}, wtotal = 0;
  cuco_kvt* layer = nullptr;  // the compute part
  int32_t* d_ptab = nullptr;  // this rank's prefill table (device copy for the compute part)
  ~State() {
    cuco_kvt_destroy(layer);
    cudaFree(d_ptab);
  }
};

char* buf(cuco_ctx* ctx, int b) { return static_cast<char*>(ctx->buffers[b].ptr); }

// 2^-floor(log2(sqrt(fan_in))): weights stay exact in bf16 and activations O(1).
float weight_scale(int64_t fan_in) { return ldexpf(1.0f, -(int)floor(log2(sqrt((double)fan_in)))); }

void gen_weights(const State& s, uint64_t seed, __nv_bfloat16* w, cudaStream_t st) {
  const int64_t fan_in[4] = {H, s.qw, H, F};
  for (int k = 0; k < 4; ++k) {
    const int64_t end = k < 3 ? s.woff[k + 1] : s.wtotal;
    gen_scaled_bf16<<<2048, 256, 0, st>>>(w + s.woff[k], (uint64_t)(end - s.woff[k]), seed,
                                          (uint64_t)s.woff[k], weight_scale(fan_in[k]));
  }
}

// Compute alone: the prefill rank's layer stack, each layer's K/V into its own pages (decode ranks: nothing).
int part_compute(cuco_ctx* ctx, State& s) {
  if (!(s.role & ROLE_PREFILL)) return 0;
  cuco_kvt_side dst = {nullptr, 0, nullptr, s.d_ptab, s.g.pool};
  for (int64_t l = 0; l < s.g.L; ++l) {
    const void* x = l ? cuco_kvt_act(s.layer, (int)(l + 1) & 1) : buf(ctx, BUF_X);
    int rc = cuco_kvt_project(s.layer, buf(ctx, BUF_W), x, (int)l & 1, ctx->stream);
    cuco_kvt_side src = {(char*)cuco_kvt_qkv(s.layer, (int)l & 1) + 2 * s.qw, s.ld, nullptr, nullptr, 0};
    dst.pages = buf(ctx, BUF_PCACHE) + 2 * layer_elem(s.g, l);
    if (!rc) rc = cuco_kvt_copy_blocks(src, dst, s.g.D, 0, s.g.nblk, 0, 2 * ctx->sm_count, ctx->stream);
    if (!rc) rc = cuco_kvt_finish(s.layer, buf(ctx, BUF_W), x, (int)l & 1, cuco_kvt_act(s.layer, (int)l & 1),
                                  ctx->stream);
    if (rc) return 300 + rc;
  }
  return 0;
}

// Communication alone, the host way: every layer's K and V (2 x S x KV bf16) from the prefill rank to its decode
// rank's staging area, one ncclSend/ncclRecv pair per layer.
int part_comm(cuco_ctx* ctx, State& s) {
  const Geo& g = s.g;
  const size_t n = (size_t)(2 * g.S * g.D);
  const int peer = pair_peer(ctx->rank, ctx->world);
  for (int64_t l = 0; l < g.L; ++l) {
    if (ncclGroupStart() != ncclSuccess) return 200;
    if ((s.role & ROLE_PREFILL) &&
        ncclSend(buf(ctx, BUF_PCACHE) + 2 * layer_elem(g, l), n, ncclBfloat16, peer, ctx->comm, ctx->stream))
      return 201;
    if ((s.role & ROLE_DECODE) &&
        ncclRecv(buf(ctx, BUF_STAGE) + 2 * stage_layer_elem(g, l), n, ncclBfloat16, peer, ctx->comm, ctx->stream))
      return 202;
    if (ncclGroupEnd() != ncclSuccess) return 203;
  }
  return 0;
}

const char* refuse(const int64_t* d, int world) {
  const int64_t S = d[0], D = d[1], L = d[2];
  if (!world_ok(world) || world > 72) return "the world size must be 1 or even (prefill -> decode pairs), at most 72";
  if (S < 1 || S % kBlockTokens) return "S must be a positive multiple of the block size 16";
  if (S % 128) return "S must be a multiple of 128 (the Hopper FMHA's key tile at head dim 128)";
  if (!cuco_kvt_query_heads(D)) return "KV must be a positive multiple of the head dim 128, at most 32 heads";
  if (L < 1 || L > kMaxLayers) return "L must be between 1 and 256";
  return nullptr;
}

cuco::kit::Buffers buffers(const int64_t* dims, int) {
  const Geo g = geo_make(dims[0], dims[1], dims[2]);
  int64_t off[4], wtotal = 0;
  cuco_kvt_weight_offsets(g.D, off, &wtotal);
  return {{
      {"X0", (size_t)(g.S * H * 2), 0, CUCO_BUF_INPUT},
      {"W", (size_t)(wtotal * 2), 0, CUCO_BUF_INPUT},
      {"tables", (size_t)(2 * g.nblk * 4), 1, CUCO_BUF_INPUT},
      {"pcache", (size_t)(cache_elems(g) * 2), 1, CUCO_BUF_SCRATCH},
      {"dcache", (size_t)(cache_elems(g) * 2), 1, CUCO_BUF_OUTPUT},
      {"stage", (size_t)(stage_elems(g) * 2), 1, CUCO_BUF_SCRATCH},
  }};
}

int setup(cuco_ctx* ctx, State& s) {
  s.g = geo_make(ctx->dims[0], ctx->dims[1], ctx->dims[2]);
  s.role = role_of(ctx->rank, ctx->world);
  cuco_kvt_weight_offsets(s.g.D, s.woff, &s.wtotal);
  s.qw = (int64_t)cuco_kvt_query_heads(s.g.D) * kHeadDim;
  s.ld = s.qw + 2 * s.g.D;
  CUCO_PLUGIN_CUDA(cudaMalloc(&s.d_ptab, 4 * s.g.nblk));
  if (s.role & ROLE_PREFILL) {
    int rc = cuco_kvt_create(&s.layer, s.g.S, s.g.D, 0, 0);
    if (rc) return 300 + rc;
  }
  return 0;
}

int fill(cuco_ctx* ctx, State& s, uint64_t seed) {
  const Geo& g = s.g;
  cudaStream_t st = ctx->stream;
  CUCO_PLUGIN_CUDA(
      cuco::gen_fill_bf16((__nv_bfloat16*)buf(ctx, BUF_X), (uint64_t)(g.S * H), seed, ctx->rank, GEN_X, st));
  gen_weights(s, seed, (__nv_bfloat16*)buf(ctx, BUF_W), st);
  CUCO_PLUGIN_CUDA(cudaGetLastError());
  std::vector<int32_t> tables(2 * g.nblk), scratch(g.pool);
  make_table(g, seed, ctx->rank, 0, tables.data(), scratch.data());
  make_table(g, seed, ctx->rank, 1, tables.data() + g.nblk, scratch.data());
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(buf(ctx, BUF_TABLES), tables.data(), 8 * g.nblk, cudaMemcpyHostToDevice, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(s.d_ptab, tables.data(), 4 * g.nblk, cudaMemcpyHostToDevice, st));
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  return 0;
}

// The reference layer stack of prefill rank p, comparing each layer's K/V with the decode pages as it goes.
struct Ref {
  __nv_bfloat16 *x = nullptr, *w = nullptr, *qkv = nullptr, *o = nullptr, *h = nullptr, *a = nullptr;
  __nv_bfloat16* xn = nullptr;  // the normalised rows a projection reads
  float* f = nullptr;  // fp32 GEMM output, [S x max(ld, 2F)]
  int32_t* dtab = nullptr;
  double *sse = nullptr, *ssr = nullptr;
  float *dec = nullptr, *dec_ref = nullptr;  // [L][qw] the decode step's attention: over the pages, the reference
  unsigned long long* nnan = nullptr;
  cublasLtHandle_t lt = nullptr;
  LtGemm gq, go, ggu, gd;
  void* ws = nullptr;
  ~Ref() {
    for (LtGemm* g : {&gq, &go, &ggu, &gd}) cuco_lt::lt_gemm_destroy(g);
    for (void* p : {(void*)x, (void*)w, (void*)qkv, (void*)o, (void*)h, (void*)a, (void*)xn, (void*)f, (void*)dtab,
                    (void*)sse, (void*)ssr, (void*)dec, (void*)dec_ref, (void*)nnan, ws})
      if (p) cudaFree(p);
    if (lt) cublasLtDestroy(lt);
  }
};

// The decode step's outputs over the pages (dec) and over the reference (dec_ref), [L][qw] each.
struct Decoded {
  std::vector<float> dec, ref;
};

int reference_check(cuco_ctx* ctx, const State& s, uint64_t seed, Ref& r, std::vector<double>& se,
                    std::vector<double>& sr, unsigned long long* nnan, Decoded& d) {
  const Geo& g = s.g;
  const int64_t S = g.S, ld = s.ld, qw = s.qw;
  cudaStream_t st = ctx->stream;
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.x, 2 * S * H));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.w, 2 * s.wtotal));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.qkv, 2 * S * ld));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.o, 2 * S * qw));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.h, 2 * S * H));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.xn, 2 * S * H));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.a, 2 * S * F));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.f, 4 * S * (ld > 2 * F ? ld : 2 * F)));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.dtab, 4 * g.nblk));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.sse, 16 * g.nblk * g.L));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.ssr, 16 * g.nblk * g.L));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.nnan, 8));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.dec, 4 * g.L * qw));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.dec_ref, 4 * g.L * qw));
  CUCO_PLUGIN_CUDA(cudaMalloc(&r.ws, kLtWorkspace));
  if (cublasLtCreate(&r.lt) != CUBLAS_STATUS_SUCCESS) return 400;
  int rc = cuco_lt::lt_gemm_plan(r.lt, &r.gq, S, H, ld, CUDA_R_32F, kLtWorkspace, 0);
  if (!rc) rc = cuco_lt::lt_gemm_plan(r.lt, &r.go, S, qw, H, CUDA_R_32F, kLtWorkspace, 0);
  if (!rc) rc = cuco_lt::lt_gemm_plan(r.lt, &r.ggu, S, H, 2 * F, CUDA_R_32F, kLtWorkspace, 0);
  if (!rc) rc = cuco_lt::lt_gemm_plan(r.lt, &r.gd, S, F, H, CUDA_R_32F, kLtWorkspace, 0);
  if (rc) return 410;
  // Inputs from the seed: the prefill peer's prompt, the weights, this rank's decode table.
  const int p = prefill_of(ctx->rank, ctx->world);
  CUCO_PLUGIN_CUDA(cuco::gen_fill_bf16(r.x, (uint64_t)(S * H), seed, p, GEN_X, st));
  gen_weights(s, seed, r.w, st);
  std::vector<int32_t> dtab(g.nblk), scratch(g.pool);
  make_table(g, seed, ctx->rank, 1, dtab.data(), scratch.data());
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(r.dtab, dtab.data(), 4 * g.nblk, cudaMemcpyHostToDevice, st));
  CUCO_PLUGIN_CUDA(cudaMemsetAsync(r.nnan, 0, 8, st));
  const int group = (int)(qw / kHeadDim / (g.D / kHeadDim));
  const size_t smem = 4 * (size_t)S;
  CUCO_PLUGIN_CUDA(cudaFuncSetAttribute(attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  CUCO_PLUGIN_CUDA(cudaFuncSetAttribute(decode_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const __nv_bfloat16* pages = (const __nv_bfloat16*)buf(ctx, BUF_DCACHE);
  for (int64_t l = 0; l < g.L; ++l) {
    rms_norm<<<(unsigned)S, 256, 0, st>>>(r.x, H, r.xn);
    if (cuco_lt::lt_gemm_run(r.lt, &r.gq, r.xn, r.w + s.woff[0], r.f, r.ws, st)) return 420;
    round_add<<<2048, 256, 0, st>>>(r.f, nullptr, S * ld, r.qkv);
    compare_blocks<<<dim3((unsigned)g.nblk, 2), 256, 0, st>>>(pages + layer_elem(g, l), r.dtab, g.pool, r.qkv, ld,
                                                              qw, g.D, r.sse + 2 * g.nblk * l, r.ssr + 2 * g.nblk * l,
                                                              r.nnan);
    const unsigned heads = (unsigned)(qw / kHeadDim);
    decode_attention<<<heads, 128, smem, st>>>(r.qkv, ld, qw, g.D, group, S, S - 1, pages + layer_elem(g, l), r.dtab,
                                               g.pool, r.dec + l * qw);
    decode_attention<<<heads, 128, smem, st>>>(r.qkv, ld, qw, g.D, group, S, S - 1, nullptr, nullptr, 0,
                                               r.dec_ref + l * qw);
    attention<<<dim3((unsigned)S, (unsigned)(qw / kHeadDim)), 128, smem, st>>>(r.qkv, ld, qw, g.D, group, r.o);
    if (cuco_lt::lt_gemm_run(r.lt, &r.go, r.o, r.w + s.woff[1], r.f, r.ws, st)) return 421;
    round_add<<<2048, 256, 0, st>>>(r.f, r.x, S * H, r.h);
    rms_norm<<<(unsigned)S, 256, 0, st>>>(r.h, H, r.xn);
    if (cuco_lt::lt_gemm_run(r.lt, &r.ggu, r.xn, r.w + s.woff[2], r.f, r.ws, st)) return 422;
    silu_mul<<<2048, 256, 0, st>>>(r.f, S, F, r.a);
    if (cuco_lt::lt_gemm_run(r.lt, &r.gd, r.a, r.w + s.woff[3], r.f, r.ws, st)) return 423;
    round_add<<<2048, 256, 0, st>>>(r.f, r.h, S * H, r.x);  // the next layer's input
    CUCO_PLUGIN_CUDA(cudaGetLastError());
  }
  se.resize(2 * g.nblk * g.L), sr.resize(2 * g.nblk * g.L);
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(se.data(), r.sse, 8 * se.size(), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(sr.data(), r.ssr, 8 * sr.size(), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(nnan, r.nnan, 8, cudaMemcpyDeviceToHost, st));
  d.dec.resize(g.L * qw), d.ref.resize(g.L * qw);
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d.dec.data(), r.dec, 4 * d.dec.size(), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d.ref.data(), r.dec_ref, 4 * d.ref.size(), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  return 0;
}

int check(cuco_ctx* ctx, State& s, uint64_t seed, cuco_check_result* out) {
  const Geo& g = s.g;
  if (!(s.role & ROLE_DECODE)) {
    out->passed = 1;
    snprintf(out->message, sizeof(out->message), "PASS: prefill rank %d holds no decode cache to check", ctx->rank);
    return 0;
  }
  std::vector<double> se, sr;
  unsigned long long nnan = 0;
  Decoded d;
  {
    Ref r;
    if (int rc = reference_check(ctx, s, seed, r, se, sr, &nnan, d)) return rc;
  }
  double dse = 0, dsr = 0;  // the decode step's attention over the received pages against the reference's
  bool dec_finite = true;
  for (size_t i = 0; i < d.dec.size(); ++i) {
    dec_finite = dec_finite && isfinite(d.dec[i]);
    dse += ((double)d.dec[i] - d.ref[i]) * ((double)d.dec[i] - d.ref[i]), dsr += (double)d.ref[i] * d.ref[i];
  }
  const double dec_rel = !dec_finite ? INFINITY : dsr > 0 ? sqrt(dse / dsr) : (dse > 0 ? INFINITY : 0.0);
  double tse = 0, tsr = 0, worst = 0;
  int64_t bad = 0, worst_at = -1;
  for (size_t i = 0; i < se.size(); ++i) {
    tse += se[i], tsr += sr[i];
    const double rel = sr[i] > 0 ? sqrt(se[i] / sr[i]) : (se[i] > 0 ? INFINITY : 0.0);
    if (rel > kBlockTol) ++bad;
    if (rel > worst) worst = rel, worst_at = (int64_t)i;
  }
  const int64_t per_block = kBlockTokens * g.D;
  out->n_checked = (int64_t)se.size() * per_block;
  out->n_nan = (int64_t)nnan;
  out->n_bad = bad * per_block;
  out->rel_l2_err = tsr > 0 ? sqrt(tse / tsr) : (tse > 0 ? INFINITY : 0.0);
  out->max_abs_err = worst;
  out->passed = nnan == 0 && bad == 0 && out->rel_l2_err < kGlobalTol && dec_rel < kGlobalTol;
  const int64_t nb = 2 * g.nblk;
  snprintf(out->message, sizeof(out->message),
           "%s: pages rel_l2=%.3g, %lld of %lld (layer, block, plane) off by > %.2g (worst %.3g: layer %lld block %lld "
           "%s), nan/inf=%llu; decode attention over them rel_l2=%.3g (pass: no nan, each < %.2g, all < %.2g)",
           out->passed ? "PASS" : "FAIL", out->rel_l2_err, (long long)bad, (long long)se.size(), kBlockTol, worst,
           (long long)(worst_at < 0 ? -1 : worst_at / nb), (long long)(worst_at < 0 ? -1 : worst_at % nb / 2),
           worst_at % 2 ? "V" : "K", nnan, dec_rel, kBlockTol, kGlobalTol);
  return 0;
}

constexpr cuco::kit::WorkloadPlugin<State> kPlugin = {
    "kv_transfer takes 3 dims S,KV,L", 3, NBUF, refuse, buffers, setup, fill, check, part_compute, part_comm};

}  // namespace

CUCO_WORKLOAD_PLUGIN(kPlugin)
