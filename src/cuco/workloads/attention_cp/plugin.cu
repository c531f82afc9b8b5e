// Harness plugin of the ring-attention workload (FlashAttention forward with context parallelism).
//
// dims = S (total tokens), HQ (query heads), HKV (KV heads), D (head dim), CAUSAL (1: causal, zigzag layout).
// Rank r holds S_r = S/W tokens (causal: zigzag chunks r and 2W-1-r; else block r) of Q and of K/V, and computes
// O_r = softmax(Q_r K^T / sqrt(D)) V over the whole sequence (query head h reads KV head h / (HQ/HKV)), with the
// log-sum-exp of every row. Layouts: compute/attention_cp.h.
//
// Buffers: 0 Q [S_r][HQ][D] (input), 1 KV [2][S_r][HKV][D] (symmetric input), 2 O [S_r][HQ][D] (output),
// 3 LSE [HQ][S_r] fp32 (output), 4 ring [W][2][S_r][HKV][D] (symmetric scratch: slot p for rank p's block),
// 5 work (scratch: a partial O [S_r][HQ][D] fp32, then its LSE [HQ][S_r] fp32, then the fp32 running O
//   [S_r][HQ][D]: cuco_attn::work_bytes).
//
// Inputs are hashes of the seed and the GLOBAL element index (token, head, channel), so the reference builds the
// whole sequence's K and V without any layout arithmetic and without reading what a candidate could touch. The
// check computes fp32 attention over the full sequence for a seeded sample of this rank's query rows (all of them
// when S_r <= 512; else 256 including every zigzag chunk's first and last row), for every head.
//
// Tolerance. The FMHA rounds P to bf16 before the PV product, and O is rounded to bf16 once (relative 2^-9; the
// ring's partials and merges are fp32, but a candidate may round more often): a typical element is off by ~0.2-0.7%
// of its size. An element passes within 3% of its reference plus 3% of the reference's rms (near-zero
// outputs), and the sampled rows' relative L2 error must stay below 1%. A skipped ring step drops a whole block
// of keys (>= 1/(2W) of a row's softmax mass: errors of tens of percent), a merge that ignores the LSE weighs
// blocks equally (errors of the order of the output itself). LSEs are fp32 throughout (scores accumulate in
// fp32 from exact bf16 inputs; __logf/exp2f err ~1e-6 relative): |dLSE| <= 1e-3 + 1e-4 |LSE|; one missing chunk
// of 128 keys out of 8192 already moves a row's LSE by ~0.016.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cuco/abi.h"
#include "cuco/compute/attention_cp.h"
#include "cuco/gen.cuh"
#include "cuco/kit/check.cuh"
#include "cuco/kit/plugin.cuh"

namespace {

using cuco_attn::Geo;
enum { BUF_Q = 0, BUF_KV = 1, BUF_O = 2, BUF_LSE = 3, BUF_RING = 4, BUF_WORK = 5, NBUF = 6 };
enum { GEN_Q = 0, GEN_K = 1, GEN_V = 2 };
constexpr int kSample = 256, kAllRowsUpTo = 512, kRefThreads = 128, kRefTile = 512;
constexpr float kRtol = 0.03f, kAtolRms = 0.03f, kRelL2 = 0.01f, kLseAtol = 1e-3f, kLseRtol = 1e-4f;

struct State {
  Geo g;
  int me = 0;
};

size_t obytes(const Geo& g) { return (size_t)(2 * g.Sr * cuco_attn::q_row_elems(g)); }
size_t lbytes(const Geo& g) { return (size_t)(4 * g.hq * g.Sr); }
size_t block_bytes(const Geo& g) { return (size_t)(2 * cuco_attn::kv_block_elems(g)); }

// Local row r of a [S_r][H][D] tensor = global token global_row(me, r) of the seeded [S][H][D] tensor.
__global__ void fill_rows(__nv_bfloat16* out, Geo g, int me, int64_t row_elems, uint64_t seed, int buf) {
  const int64_t n = g.Sr * row_elems;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = cuco_attn::global_row(g, me, i / row_elems);
    out[i] = __float2bfloat16(cuco::gen_value(seed, 0, buf, t * row_elems + i % row_elems));
  }
}

__global__ void gen_full(float* out, int64_t n, uint64_t seed, int buf) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = cuco::gen_value(seed, 0, buf, i);
}

__device__ float block_reduce(float v, float* red, bool is_max) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] = is_max ? fmaxf(red[threadIdx.x], red[threadIdx.x + s])
                                                        : red[threadIdx.x] + red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

// fp32 attention of one (sampled global token, head) per CTA over the whole sequence's keys (k, v: [S][HKV][D]
// fp32), online softmax over tiles of kRefTile keys. Q is regenerated from the seed.
__global__ void ref_attention(const float* k, const float* v, const int64_t* tok, Geo g, uint64_t seed, float* oref,
                              float* lref) {
  __shared__ float q[128], p[kRefTile], red[kRefThreads];
  const int sample = blockIdx.x / g.hq, h = blockIdx.x % g.hq, hk = h / (g.hq / g.hkv), D = g.d;
  const int64_t t = tok[sample];
  if ((int)threadIdx.x < D) q[threadIdx.x] = cuco::gen_value(seed, 0, GEN_Q, (t * g.hq + h) * D + threadIdx.x);
  __syncthreads();
  const int64_t nkeys = g.causal ? t + 1 : g.S;
  const float scale = 1.0f / sqrtf((float)D);
  float m = -INFINITY, l = 0.f, acc = 0.f;
  for (int64_t j0 = 0; j0 < nkeys; j0 += kRefTile) {
    const int cnt = (int)(nkeys - j0 < kRefTile ? nkeys - j0 : kRefTile);
    float tmax = -INFINITY;
    for (int jj = threadIdx.x; jj < cnt; jj += blockDim.x) {
      const float* kr = k + ((j0 + jj) * g.hkv + hk) * D;
      float s = 0.f;
      for (int d = 0; d < D; ++d) s += q[d] * kr[d];
      p[jj] = s * scale;
      tmax = fmaxf(tmax, p[jj]);
    }
    const float mn = fmaxf(m, block_reduce(tmax, red, true));
    float tsum = 0.f;
    for (int jj = threadIdx.x; jj < cnt; jj += blockDim.x) tsum += (p[jj] = expf(p[jj] - mn));
    tsum = block_reduce(tsum, red, false);  // its barriers also publish p[]
    const float corr = expf(m - mn);
    l = l * corr + tsum;
    if ((int)threadIdx.x < D) {
      float a = 0.f;
      for (int jj = 0; jj < cnt; ++jj) a += p[jj] * v[((j0 + jj) * g.hkv + hk) * D + threadIdx.x];
      acc = acc * corr + a;
    }
    m = mn;
    __syncthreads();
  }
  if ((int)threadIdx.x < D) oref[((int64_t)sample * g.hq + h) * D + threadIdx.x] = acc / l;
  if (threadIdx.x == 0) lref[(int64_t)sample * g.hq + h] = m + logf(l);
}

// The candidate's sampled rows, compacted: cand[k][HQ][D] = O[row[k]][HQ][D], lcand[k][h] = LSE[h][row[k]].
__global__ void gather_rows(const __nv_bfloat16* o, const float* lse, const int64_t* rows, int n, Geo g,
                            __nv_bfloat16* cand, float* lcand) {
  const int64_t re = cuco_attn::q_row_elems(g);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * re; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t kk = i / re, e = i % re;
    cand[i] = o[rows[kk] * re + e];
    if (e % g.d == 0) lcand[kk * g.hq + e / g.d] = lse[(e / g.d) * g.Sr + rows[kk]];
  }
}

// Local rows to check: all when few, else the first and last row of every chunk plus seeded ones.
std::vector<int64_t> sample_rows(const Geo& g, uint64_t seed, int me) {
  std::vector<int64_t> rows;
  if (g.Sr <= kAllRowsUpTo) {
    for (int64_t r = 0; r < g.Sr; ++r) rows.push_back(r);
    return rows;
  }
  const int64_t chunk = g.causal ? g.half : g.Sr;
  for (int64_t c0 = 0; c0 < g.Sr; c0 += chunk) rows.push_back(c0), rows.push_back(c0 + chunk - 1);
  for (uint64_t i = 0; rows.size() < (size_t)kSample; ++i)
    rows.push_back((int64_t)(cuco::splitmix64(seed * 0x9E37ull ^ ((uint64_t)me << 48) ^ i) % (uint64_t)g.Sr));
  return rows;
}

// Part "compute": the ring's attention and merges with this rank's own KV block standing in for every source
// (same pieces, same flops), no communication.
int part_compute(cuco_ctx* ctx, State& s) {
  const Geo& g = s.g;
  char* work = (char*)ctx->buffers[BUF_WORK].ptr;
  for (int step = 0; step < g.W; ++step) {
    int rc = cuco_attn::ring_step(g, s.me, step, ctx->buffers[BUF_Q].ptr, ctx->buffers[BUF_KV].ptr,
                                  ctx->buffers[BUF_O].ptr, (float*)ctx->buffers[BUF_LSE].ptr, work, ctx->stream);
    if (rc) return rc;
  }
  return cuco_attn::ring_finish(g, ctx->buffers[BUF_O].ptr, work, ctx->stream);
}

// Part "comm": the host ring alone, every block forwarded W-1 times (ncclSend/ncclRecv).
int part_comm(cuco_ctx* ctx, State& s) {
  const Geo& g = s.g;
  char* ring = (char*)ctx->buffers[BUF_RING].ptr;
  const size_t bytes = block_bytes(g);
  for (int step = 1; step < g.W; ++step) {
    const int held = cuco_attn::source_at(s.me, step - 1, g.W), next = cuco_attn::source_at(s.me, step, g.W);
    const char* cur = step == 1 ? (const char*)ctx->buffers[BUF_KV].ptr : ring + held * bytes;
    if (ncclGroupStart() != ncclSuccess) return 200;
    if (ncclSend(cur, bytes / 2, ncclBfloat16, (s.me + 1) % g.W, ctx->comm, ctx->stream) != ncclSuccess) return 201;
    if (ncclRecv(ring + next * bytes, bytes / 2, ncclBfloat16, (s.me + g.W - 1) % g.W, ctx->comm, ctx->stream) !=
        ncclSuccess)
      return 202;
    if (ncclGroupEnd() != ncclSuccess) return 203;
  }
  return 0;
}

const char* refuse(const int64_t* d, int world) {
  const int64_t S = d[0], HQ = d[1], HKV = d[2], D = d[3], C = d[4];
  if (world < 1 || world > 72) return "the world size must be between 1 and 72 (one NVLink domain)";
  if (C != 0 && C != 1) return "CAUSAL must be 0 or 1";
  if (D != 32 && D != 64 && D != 128) return "head dim D must be 32, 64 or 128 (the compute library's FMHA)";
  if (HQ < 1 || HKV < 1 || HQ % HKV) return "HQ must be a positive multiple of HKV (GQA groups)";
  const int64_t parts = C ? 2 * world : world;
  if (S < 1 || S % parts || (S / parts) % 128)
    return "S must be a multiple of 128 * W (non-causal) or 128 * 2W (causal zigzag chunks)";
  if ((S / world) * HQ * D >= (1ll << 31)) return "S/W * HQ * D must stay below 2^31";
  return nullptr;
}

cuco::kit::Buffers buffers(const int64_t* dims, int world) {
  const Geo g = cuco_attn::geo_of_dims(dims, world);
  return {{
      {"Q", obytes(g), 0, CUCO_BUF_INPUT},
      {"KV", block_bytes(g), 1, CUCO_BUF_INPUT},
      {"O", obytes(g), 0, CUCO_BUF_OUTPUT},
      {"LSE", lbytes(g), 0, CUCO_BUF_OUTPUT},
      {"ring", block_bytes(g) * (size_t)world, 1, CUCO_BUF_SCRATCH},
      {"work", (size_t)cuco_attn::work_bytes(g), 0, CUCO_BUF_SCRATCH},
  }};
}

int setup(cuco_ctx* ctx, State& s) {
  s.g = cuco_attn::geo_of_dims(ctx->dims, ctx->world);
  s.me = ctx->rank;
  return 0;
}

int fill(cuco_ctx* ctx, State& s, uint64_t seed) {
  const Geo& g = s.g;
  cudaStream_t st = ctx->stream;
  __nv_bfloat16* kv = (__nv_bfloat16*)ctx->buffers[BUF_KV].ptr;
  fill_rows<<<2048, 256, 0, st>>>((__nv_bfloat16*)ctx->buffers[BUF_Q].ptr, g, s.me, cuco_attn::q_row_elems(g), seed,
                                  GEN_Q);
  fill_rows<<<2048, 256, 0, st>>>(kv, g, s.me, cuco_attn::kv_row_elems(g), seed, GEN_K);
  fill_rows<<<2048, 256, 0, st>>>(kv + g.Sr * cuco_attn::kv_row_elems(g), g, s.me, cuco_attn::kv_row_elems(g), seed,
                                  GEN_V);
  CUCO_PLUGIN_CUDA(cudaGetLastError());
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  return 0;
}

int check(cuco_ctx* ctx, State& s, uint64_t seed, cuco_check_result* out) {
  const Geo& g = s.g;
  cudaStream_t st = ctx->stream;
  const std::vector<int64_t> rows = sample_rows(g, seed, s.me);
  const int n = (int)rows.size();
  std::vector<int64_t> tok(n);
  for (int i = 0; i < n; ++i) tok[i] = cuco_attn::global_row(g, s.me, rows[i]);
  const int64_t full = g.S * cuco_attn::kv_row_elems(g), re = cuco_attn::q_row_elems(g);
  float *k = nullptr, *v = nullptr, *oref = nullptr, *lref = nullptr, *lcand = nullptr;
  int64_t *d_tok = nullptr, *d_rows = nullptr;
  __nv_bfloat16* cand = nullptr;
  cuco::kit::CompareStats* stats = nullptr;
  CUCO_PLUGIN_CUDA(cudaMalloc(&k, 4 * full));
  CUCO_PLUGIN_CUDA(cudaMalloc(&v, 4 * full));
  CUCO_PLUGIN_CUDA(cudaMalloc(&oref, 4 * n * re));
  CUCO_PLUGIN_CUDA(cudaMalloc(&lref, 4 * n * g.hq));
  CUCO_PLUGIN_CUDA(cudaMalloc(&lcand, 4 * n * g.hq));
  CUCO_PLUGIN_CUDA(cudaMalloc(&cand, 2 * n * re));
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_tok, 8 * n));
  CUCO_PLUGIN_CUDA(cudaMalloc(&d_rows, 8 * n));
  CUCO_PLUGIN_CUDA(cudaMalloc(&stats, sizeof(cuco::kit::CompareStats)));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d_tok, tok.data(), 8 * n, cudaMemcpyHostToDevice, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(d_rows, rows.data(), 8 * n, cudaMemcpyHostToDevice, st));
  gen_full<<<2048, 256, 0, st>>>(k, full, seed, GEN_K);
  gen_full<<<2048, 256, 0, st>>>(v, full, seed, GEN_V);
  ref_attention<<<n * g.hq, kRefThreads, 0, st>>>(k, v, d_tok, g, seed, oref, lref);
  gather_rows<<<1024, 256, 0, st>>>((const __nv_bfloat16*)ctx->buffers[BUF_O].ptr,
                                    (const float*)ctx->buffers[BUF_LSE].ptr, d_rows, n, g, cand, lcand);
  CUCO_PLUGIN_CUDA(cudaGetLastError());
  CUCO_PLUGIN_CUDA(cuco::kit::compare_bf16(cand, oref, (size_t)(n * re), kRtol, kAtolRms, stats, st));
  cuco::kit::CompareStats h;
  std::vector<float> lr(n * g.hq), lc(n * g.hq);
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(&h, stats, sizeof(h), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(lr.data(), lref, 4 * lr.size(), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaMemcpyAsync(lc.data(), lcand, 4 * lc.size(), cudaMemcpyDeviceToHost, st));
  CUCO_PLUGIN_CUDA(cudaStreamSynchronize(st));
  for (void* p : {(void*)k, (void*)v, (void*)oref, (void*)lref, (void*)lcand, (void*)cand, (void*)d_tok,
                  (void*)d_rows, (void*)stats})
    cudaFree(p);
  cuco::kit::fill_check(h, (size_t)(n * re), out);
  int64_t lse_bad = 0;
  double lse_worst = 0;
  for (size_t i = 0; i < lr.size(); ++i) {
    const double d = fabs((double)lc[i] - lr[i]);
    if (!(d <= kLseAtol + kLseRtol * fabs(lr[i]))) ++lse_bad;  // NaN counts as bad
    if (!(d <= lse_worst)) lse_worst = d;
  }
  out->n_bad += lse_bad;
  out->passed = out->n_nan == 0 && out->n_bad == 0 && out->rel_l2_err < kRelL2;
  snprintf(out->message, sizeof(out->message),
           "%s: %d sampled rows x %d heads: O rel_l2=%.3g (< %.2g), %lld outside %.2g|ref| + %.2g rms, nan/inf=%lld; "
           "LSE worst |d|=%.3g, %lld outside %.0e + %.0e|ref|; max|O-ref|/max|ref|=%.3g",
           out->passed ? "PASS" : "FAIL", n, g.hq, out->rel_l2_err, (double)kRelL2, (long long)(h.nbad), (double)kRtol,
           (double)kAtolRms, (long long)out->n_nan, lse_worst, (long long)lse_bad, (double)kLseAtol,
           (double)kLseRtol, cuco::kit::ref_max_abs(h) > 0 ? out->max_abs_err / cuco::kit::ref_max_abs(h) : 0.0);
  return 0;
}

constexpr cuco::kit::WorkloadPlugin<State> kPlugin = {
    "attention_cp takes 5 dims S,HQ,HKV,D,CAUSAL", 5, NBUF, refuse, buffers, setup, fill, check, part_compute,
    part_comm};

}  // namespace

CUCO_WORKLOAD_PLUGIN(kPlugin)
