// Ring-attention compute library: attention of a block of query rows against a block of key/value rows with the
// log-sum-exp (CUTLASS Hopper FMHA, bf16 in/out, fp32 accumulate), and the log-sum-exp merge of a partial result
// into a running one. Plus the zigzag layout arithmetic (__host__ __device__, unit-tested on the CPU) that the
// plugin, the host seed and every candidate share.
//
// Layouts (bf16, token-major; one rank's S_r = S / W local tokens):
//   Q, O      [S_r][HQ][D]
//   KV block  [2][S_r][HKV][D]   (K rows, then V rows: one contiguous block per rank, moved as one)
//   LSE       fp32 [HQ][lse_ld]  (natural log; lse_ld = S_r)
#pragma once

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// O[q rows] (fp32), LSE[q rows] = softmax(Q K^T / sqrt(D)) V for q_rows query rows against k_rows key rows;
// o32 is a float [q rows][HQ][D]. Pointers point at the first row (q + q0 * HQ * D, k + k0 * HKV * D,
// o32 + q0 * HQ * D, lse + q0). causal: query i sees keys j <= i (needs q_rows == k_rows). k_rows must be a
// multiple of 128; D one of 32, 64, 128; HQ % HKV == 0. Enqueued on `stream`; 0 on success, else the FMHA's status
// (1 arguments, 2-4 CUTLASS) or 9 (head dim). The output is fp32 because the ring merges its partials in fp32 and
// rounds once at the end: a bf16 partial per ring step made the error grow with W (2.2e-3 of max |O| at W = 1,
// 5.2e-3 at W = 4 with fp32 merges of bf16 partials, 7.4e-3 with bf16 merges; benchmarks/attention_merge_accuracy.py).
int cuco_attn_block_f32(const void* q, const void* k, const void* v, void* o32, float* lse, int64_t q_rows,
                        int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld, int causal,
                        cudaStream_t stream);
// The same with a bf16 O [q rows][HQ][D], for a result that is never merged: the ring's only step at W = 1. It
// assumes the GPU to itself: at head dims 32 and 64 it takes the FMHA's persistent scheduler (one CTA per SM with
// tiles dealt up front), which a kernel running beside it would slow by its whole share; at 128 the same kernel
// instantiation as cuco_attn_block_f32 (O's type is taken per call).
int cuco_attn_block_bf16(const void* q, const void* k, const void* v, void* o, float* lse, int64_t q_rows,
                         int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld, int causal,
                         cudaStream_t stream);

// O (bf16) and LSE of q_rows queries that are the last q_rows tokens of a causal sequence whose first k_rows keys
// k and v hold: query i sees keys j <= i + (k_rows - q_rows) (the causal mask aligned bottom-right); k_rows - q_rows
// >= 0 and a multiple of 128. The form a rank's attention takes once it holds the K/V of every token before its own
// (gathered from every peer at once, in global order) instead of passing blocks round a ring: each zigzag chunk of
// its queries is one call, with nothing to merge. Cooperative scheduler (it may run beside communication). Status
// as cuco_attn_block_f32.
int cuco_attn_suffix_bf16(const void* q, const void* k, const void* v, void* o, float* lse, int64_t q_rows,
                          int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld,
                          cudaStream_t stream);

// Where the keys of a waiting call come from (cuco/kit/compute/fmha_arrival.cuh, KvArrival): the source of region
// row r is chunk r / chunk_rows's owner (zigzag: chunk c < world is c's, the rest 2 * world - 1 - c's); its landed
// flag is flag0[src * src_stride], landed when it has reached *epoch_at; row0 is the region row of the call's key 0.
typedef struct {
  const uint32_t* flag0;
  const uint32_t* epoch_at;
  int64_t src_stride, chunk_rows, row0;
  int world, zigzag;
} cuco_attn_arrival;

// cuco_attn_suffix_bf16 whose every KV tile first waits for its source's landed flag (arrival; null: no wait),
// inside the kernel: the call can be launched before its keys have landed and attends to those that have while the
// rest arrive. Persistent on at most sm_count SMs (0: all): a waiting CTA holds its SM, so leave the SMs that raise
// the flags. Status as cuco_attn_block_f32 (1 also for an arrival whose chunks split a 128-row KV tile).
int cuco_attn_suffix_wait_bf16(const void* q, const void* k, const void* v, void* o, float* lse, int64_t q_rows,
                               int64_t k_rows, int heads_q, int heads_kv, int head_dim, int64_t lse_ld,
                               const cuco_attn_arrival* arrival, int sm_count, cudaStream_t stream);

// Merge an fp32 partial result (o_blk, lse_blk) of `rows` query rows into the fp32 running one (o32, lse), in place:
//   lse' = log(exp(lse) + exp(lse_blk)),  o' = o * exp(lse - lse') + o_blk * exp(lse_blk - lse').
// Pointers point at the first row, as for cuco_attn_block_f32; both outputs are float [rows][HQ][D] (MergeFn-
// compatible). A slice pipeline merges once per slice: a bf16 running output rounded at every merge drifted past the
// check's tolerance after 16 to 128 merges. cuco_attn_start_f32 sets o32 = 0 and lse = -inf for `rows` rows
// (lse_ld = rows), so the first merge takes its partial as it is; cuco_attn_finish_f32 writes bf16 o from o32 once
// at the end. 0 on success.
int cuco_attn_merge_f32(void* o32, float* lse, const void* o_blk, const float* lse_blk, int64_t rows, int heads,
                        int head_dim, int64_t lse_ld, cudaStream_t stream);
int cuco_attn_start_f32(void* o32, float* lse, int64_t rows, int heads, int head_dim, cudaStream_t stream);
int cuco_attn_finish_f32(void* o, const void* o32, int64_t rows, int heads, int head_dim, cudaStream_t stream);

// The kernel configuration, for reports.
const char* cuco_attn_config(void);

#ifdef __cplusplus
}  // extern "C"

#ifdef __CUDACC__
#define CUCO_ATTN_HD __host__ __device__
#else
#define CUCO_ATTN_HD
#endif

// ---- zigzag ring layout ------------------------------------------------------------------------------------
// Causal: the sequence of S tokens is cut into 2W chunks of S/(2W); rank r holds chunks r and 2W-1-r (local rows
// 0..half-1, then half..S_r-1), so every rank does the same causal work. Non-causal: rank r holds chunk r of W.
// At ring step s rank r attends to the KV block of rank (r - s) mod W.
namespace cuco_attn {

struct Geo {
  int64_t S, Sr, half;  // total tokens, tokens per rank, tokens per zigzag chunk (S_r / 2)
  int W, causal;
  int hq, hkv, d;       // query heads, KV heads, head dim
};

CUCO_ATTN_HD inline Geo make_geo(int64_t S, int W, int causal, int hq = 1, int hkv = 1, int d = 32) {
  Geo g;
  g.S = S, g.W = W, g.causal = causal, g.hq = hq, g.hkv = hkv, g.d = d;
  g.Sr = S / W;
  g.half = g.Sr / 2;
  return g;
}

// The geometry of a launch from the workload's dims (S, HQ, HKV, D, CAUSAL) and world size.
CUCO_ATTN_HD inline Geo geo_of_dims(const int64_t* dims, int W) {
  return make_geo(dims[0], W, (int)dims[4], (int)dims[1], (int)dims[2], (int)dims[3]);
}

// Elements of one row of Q/O and of K (or V); elements of a rank's KV block (K rows, then V rows).
CUCO_ATTN_HD inline int64_t q_row_elems(const Geo& g) { return (int64_t)g.hq * g.d; }
CUCO_ATTN_HD inline int64_t kv_row_elems(const Geo& g) { return (int64_t)g.hkv * g.d; }
CUCO_ATTN_HD inline int64_t kv_block_elems(const Geo& g) { return 2 * g.Sr * kv_row_elems(g); }

// The rank whose KV block `me` attends to at ring step `step` (step 0: its own).
CUCO_ATTN_HD inline int source_at(int me, int step, int W) { return ((me - step) % W + W) % W; }

// Global token index of local row i of rank r.
CUCO_ATTN_HD inline int64_t global_row(const Geo& g, int r, int64_t i) {
  if (!g.causal) return (int64_t)r * g.Sr + i;
  return i < g.half ? (int64_t)r * g.half + i : (int64_t)(2 * g.W - 1 - r) * g.half + (i - g.half);
}

// The rank holding global token t.
CUCO_ATTN_HD inline int owner_of(const Geo& g, int64_t t) {
  if (!g.causal) return (int)(t / g.Sr);
  const int c = (int)(t / g.half);
  return c < g.W ? c : 2 * g.W - 1 - c;
}

// The KV rows of `src`'s block that `me` needs: [0, rows). Causal: a lower rank's second chunk lies wholly in
// the future of both of me's chunks, so only its first chunk is read.
CUCO_ATTN_HD inline int64_t kv_rows_needed(const Geo& g, int me, int src) {
  return (g.causal && src < me) ? g.half : g.Sr;
}

// One FMHA call: query rows [q0, q0 + nq) of `me` against rows [k0, k0 + nk) of a source's KV block; causal
// means the top-left aligned mask (q0 == k0, nq == nk: the diagonal of `me`'s own block).
struct Piece {
  int64_t q0, nq, k0, nk;
  int causal;
};

// The pieces of attention of `me` against rows [a, b) of src's KV block: at most 2, written to out; returns
// their count. The pieces of (me, src = me, [0, b)) cover every query row of `me` exactly once, so the first
// chunk of the own block can write the output directly; every later piece is merged.
CUCO_ATTN_HD inline int pieces(const Geo& g, int me, int src, int64_t a, int64_t b, Piece* out) {
  const int64_t need = kv_rows_needed(g, me, src);
  if (b > need) b = need;
  if (a >= b) return 0;
  if (!g.causal) {
    out[0] = Piece{0, g.Sr, a, b - a, 0};
    return 1;
  }
  if (src == me) {  // local rows are in global order: the local causal mask is the global one
    int n = 0;
    out[n++] = Piece{a, b - a, a, b - a, 1};
    if (b < g.Sr) out[n++] = Piece{b, g.Sr - b, a, b - a, 0};
    return n;
  }
  if (src < me) {  // src's first chunk precedes both of me's chunks
    out[0] = Piece{0, g.Sr, a, b - a, 0};
    return 1;
  }
  // src > me: src's chunks both follow me's first chunk and precede me's second one
  out[0] = Piece{g.half, g.half, a, b - a, 0};
  return 1;
}

// ---- host: one slice of the ring's attention ----------------------------------------------------------------
typedef int (*MergeFn)(void* o, float* lse, const void* o_blk, const float* lse_blk, int64_t rows, int heads,
                       int head_dim, int64_t lse_ld, cudaStream_t stream);

// A ring of one step (W = 1) attends its own block whole and direct, straight into the bf16 output: no fp32
// running output and no rounding pass (ring_finish has nothing to do).
CUCO_ATTN_HD inline bool single_step(const Geo& g) { return g.W == 1; }

// Attention of `me`'s queries q against rows [a, b) of src's KV block kv (the block's base: K rows, then V rows).
// direct: the pieces write o and lse themselves (only for the first chunk of the own block, whose pieces cover
// every row once); otherwise each piece goes to (o_blk, lse_blk) and `merge` folds it into (o, lse). o and o_blk
// are fp32 (cuco_attn_block_f32 writes the pieces): a piece's rows start at q0 rows of o and of o_blk in fp32, and at
// q0 rows of q in bf16. o_final is the bf16 output O: a direct call of a single-step ring writes it instead of o
// and must cover the whole block (else 300: nothing would round the rest).
inline int attend_rows(const Geo& g, int me, int src, int64_t a, int64_t b, const void* q, const void* kv, void* o,
                       float* lse, void* o_blk, float* lse_blk, bool direct, MergeFn merge, void* o_final,
                       cudaStream_t s) {
  Piece p[2];
  const int n = pieces(g, me, src, a, b, p);
  const bool to_final = direct && single_step(g);
  if (to_final && (a != 0 || b < kv_rows_needed(g, me, src) || !o_final)) return 300;
  const char* qb = (const char*)q;
  const char* kb = (const char*)kv;
  const char* vb = kb + 2 * g.Sr * kv_row_elems(g);
  for (int i = 0; i < n; ++i) {
    const int64_t qo = 2 * p[i].q0 * q_row_elems(g), ko = 2 * p[i].k0 * kv_row_elems(g);
    const int64_t oo = 4 * p[i].q0 * q_row_elems(g);
    float* l = (direct ? lse : lse_blk) + p[i].q0;
    int rc;
    if (to_final) {
      rc = cuco_attn_block_bf16(qb + qo, kb + ko, vb + ko, (char*)o_final + qo, l, p[i].nq, p[i].nk, g.hq, g.hkv,
                                g.d, g.Sr, p[i].causal, s);
      if (rc) return 100 + rc;
      continue;
    }
    char* out = (char*)(direct ? o : o_blk) + oo;
    rc = cuco_attn_block_f32(qb + qo, kb + ko, vb + ko, out, l, p[i].nq, p[i].nk, g.hq, g.hkv, g.d, g.Sr,
                             p[i].causal, s);
    if (rc) return 100 + rc;
    if (!direct && (rc = merge((char*)o + oo, lse + p[i].q0, out, l, p[i].nq, g.hq, g.d, g.Sr, s))) return 200 + rc;
  }
  return 0;
}

// The work buffer of the ring (buffer 5): a partial O of up to fp32 [S_r][HQ][D], its LSE fp32 [HQ][S_r], then the
// fp32 running output [S_r][HQ][D]. Offsets in bytes from the buffer's base.
inline int64_t work_partial_lse_at(const Geo& g) { return 4 * g.Sr * q_row_elems(g); }
inline int64_t work_running_at(const Geo& g) { return work_partial_lse_at(g) + 4 * (int64_t)g.hq * g.Sr; }
inline int64_t work_bytes(const Geo& g) { return work_running_at(g) + 4 * g.Sr * q_row_elems(g); }

// The ring's W steps in fp32, as every schedule runs them: step 0 (the own block, direct) writes the running
// output, each later one merges into it, and ring_finish rounds it to bf16 o once. At W = 1 step 0 writes o itself.
inline int ring_step(const Geo& g, int me, int step, const void* q, const void* kv, void* o, float* lse, char* work,
                     cudaStream_t s) {
  return attend_rows(g, me, source_at(me, step, g.W), 0, g.Sr, q, kv, work + work_running_at(g), lse, work,
                     (float*)(work + work_partial_lse_at(g)), step == 0, cuco_attn_merge_f32, o, s);
}
// o = bf16(the running output), whatever W: for a schedule that merged every slice (none direct).
inline int round_running(const Geo& g, void* o, const char* work, cudaStream_t s) {
  return cuco_attn_finish_f32(o, work + work_running_at(g), g.Sr, g.hq, g.d, s);
}
// The ring's end after a direct step 0: the rounding, or nothing at W = 1 (step 0 wrote o).
inline int ring_finish(const Geo& g, void* o, const char* work, cudaStream_t s) {
  return single_step(g) ? 0 : round_running(g, o, work, s);
}

// ---- gathered K/V: forms that no ring can take -------------------------------------------------------------
// A rank that pulls from every peer at once can lay the K/V it needs out in one region and attend to it in fewer,
// larger calls than the ring's W (measured on one GPU: benchmarks/results/attention_gather/README.md). The region
// (buffer 4, the ring's bytes) holds S K rows, then S V rows. Two forms:
//   hybrid:   the ring's step 0 (the own block, direct, nothing to wait for), then at most two merged calls without
//             a mask: every query row against the first chunks of the lower ranks (which precede both of its
//             chunks), and the second chunk's rows against the whole blocks of the higher ranks (full attention:
//             every query row against every other block). Key order inside a call does not matter, so each call's
//             rows are packed: lower ranks' first chunks at rows [0, me * half), higher ranks' blocks after them.
//   gathered: every token this rank needs at its global position, its own included; each zigzag chunk of its
//             queries is one call against the whole key prefix before it, the causal mask aligned bottom-right
//             (cuco_attn_suffix_bf16); full attention is one call against all S keys. Nothing to merge.
enum GatherForm { kRingForm = 0, kHybridForm = 1, kGatheredForm = 2 };

// Local rows [from, from + n) of a source's KV block land at rows [to, to + n) of the region (K half and V half).
struct RowRun {
  int64_t from, n, to;
};

// Where the rows `me` needs of src's block land in the region: at most 2 runs, written to out; returns their count
// (0: nothing moves, e.g. the own block of the hybrid, attended in place).
CUCO_ATTN_HD inline int gather_runs(const Geo& g, int me, int src, int form, RowRun* out) {
  if (form == kHybridForm) {
    if (src == me) return 0;
    if (!g.causal) {
      out[0] = RowRun{0, g.Sr, (int64_t)((src - me - 1 + g.W) % g.W) * g.Sr};
      return 1;
    }
    if (src < me) {
      out[0] = RowRun{0, g.half, (int64_t)src * g.half};
      return 1;
    }
    out[0] = RowRun{0, g.Sr, (int64_t)me * g.half + (int64_t)(src - me - 1) * g.Sr};
    return 1;
  }
  if (!g.causal) {
    out[0] = RowRun{0, g.Sr, (int64_t)src * g.Sr};
    return 1;
  }
  out[0] = RowRun{0, g.half, (int64_t)src * g.half};
  if (src < me) return 1;  // its second chunk lies after both of me's
  out[1] = RowRun{g.half, g.half, (int64_t)(2 * g.W - 1 - src) * g.half};
  return 2;
}

// The k-th source (k = 0..W-1) whose rows move into the region, in the order the calls need them: the own block
// first (gathered form; -1 for the hybrid, which attends it in place), then the lower ranks, then the higher ones.
CUCO_ATTN_HD inline int gather_source(const Geo& g, int me, int k, int form) {
  if (k == 0) return form == kGatheredForm ? me : -1;
  return k <= me ? k - 1 : k;
}

// One call over the region: query rows [q0, q0 + nq) of `me` against region rows [k0, k0 + nk); suffix: the causal
// mask aligned bottom-right (query i sees keys j <= i + nk - nq); waits: bit src set for every source whose rows the
// call reads (they must have landed).
struct GatherCall {
  int64_t q0, nq, k0, nk;
  int suffix;
  uint32_t waits;
};

// The calls of `me` over the region after the hybrid's own step (or of the whole gathered form): at most 2, in
// the order to run them; returns their count.
CUCO_ATTN_HD inline int gather_calls(const Geo& g, int me, int form, GatherCall* out) {
  const uint32_t all = g.W >= 32 ? 0xffffffffu : (1u << g.W) - 1, lower = (1u << me) - 1;
  int n = 0;
  if (form == kHybridForm) {
    if (!g.causal) {
      if (g.W > 1) out[n++] = GatherCall{0, g.Sr, 0, (int64_t)(g.W - 1) * g.Sr, 0, all & ~(1u << me)};
      return n;
    }
    if (me > 0) out[n++] = GatherCall{0, g.Sr, 0, (int64_t)me * g.half, 0, lower};
    if (me < g.W - 1)
      out[n++] = GatherCall{g.half, g.half, (int64_t)me * g.half, (int64_t)(g.W - 1 - me) * g.Sr, 0,
                            all & ~lower & ~(1u << me)};
    return n;
  }
  if (!g.causal) {
    out[n++] = GatherCall{0, g.Sr, 0, g.S, 0, all};
    return n;
  }
  out[n++] = GatherCall{0, g.half, 0, (int64_t)(me + 1) * g.half, 1, lower | (1u << me)};
  out[n++] = GatherCall{g.half, g.half, 0, (int64_t)(2 * g.W - me) * g.half, 1, all};
  return n;
}

// Query rows per work tile of the library's FMHA (its 128x128 tile at every head dim).
constexpr int kFmhaQRows = 128;

// The CTAs of the gathered form's waiting calls (fused placement) on sm_count SMs of which at least min_free stay
// with the pulls; the pulls take the rest. A call's T = ceil(half / 128) * HQ work tiles take ceil(T / cap) waves on
// cap = sm_count - min_free persistent CTAs, and ceil(T / waves) CTAs give the same waves: more only idle. Measured
// on one H200 (benchmarks/results/attention_gather/README.md): capped at 116 of 132 SMs, the waiting calls took
// 1.13-1.80x the same calls on all 132, exactly the ratio of their waves (128 tiles: 2 waves against 1; 256: 3
// against 2), so the SMs a call cannot use are the pulls' at no cost to it. Full attention has no waiting call (its
// stream waits, then it takes every SM): the pulls keep min_free SMs.
CUCO_ATTN_HD inline int fused_fmha_ctas(const Geo& g, int sm_count, int min_free) {
  const int cap = sm_count - min_free;
  if (cap < 1) return 1;
  if (!g.causal) return cap;
  const int64_t tiles = (g.half + kFmhaQRows - 1) / kFmhaQRows * g.hq;
  const int64_t waves = (tiles + cap - 1) / cap;
  return (int)((tiles + waves - 1) / waves);
}

// One call of gather_calls. region: the region's base (K half, then V half at S rows). The hybrid's calls write an
// fp32 partial (o_blk, lse_blk) and `merge` folds it into the running output (o32, lse) after its step 0; the
// gathered form's write bf16 o_final and lse directly (its calls cover every query row once; nothing to round).
// arrival (gathered form, suffix calls only): the call waits for its keys inside the kernel, on at most sm_count
// SMs; null: the caller has made the stream wait. Status as attend_rows (100 + the FMHA's, 200 + the merge's).
inline int gather_attend(const Geo& g, int form, const GatherCall& c, const void* q, const void* region, void* o32,
                         float* lse, void* o_blk, float* lse_blk, MergeFn merge, void* o_final, cudaStream_t s,
                         const cuco_attn_arrival* arrival = nullptr, int sm_count = 0) {
  const char* qb = (const char*)q + 2 * c.q0 * q_row_elems(g);
  const char* kb = (const char*)region + 2 * c.k0 * kv_row_elems(g);
  const char* vb = kb + 2 * g.S * kv_row_elems(g);
  int rc;
  if (form == kGatheredForm) {
    char* ob = (char*)o_final + 2 * c.q0 * q_row_elems(g);
    if (c.suffix && arrival)
      rc = cuco_attn_suffix_wait_bf16(qb, kb, vb, ob, lse + c.q0, c.nq, c.nk, g.hq, g.hkv, g.d, g.Sr, arrival,
                                      sm_count, s);
    else
      rc = c.suffix ? cuco_attn_suffix_bf16(qb, kb, vb, ob, lse + c.q0, c.nq, c.nk, g.hq, g.hkv, g.d, g.Sr, s)
                    : cuco_attn_block_bf16(qb, kb, vb, ob, lse + c.q0, c.nq, c.nk, g.hq, g.hkv, g.d, g.Sr, 0, s);
    return rc ? 100 + rc : 0;
  }
  char* out = (char*)o_blk + 4 * c.q0 * q_row_elems(g);
  if ((rc = cuco_attn_block_f32(qb, kb, vb, out, lse_blk + c.q0, c.nq, c.nk, g.hq, g.hkv, g.d, g.Sr, 0, s)))
    return 100 + rc;
  rc = merge((char*)o32 + 4 * c.q0 * q_row_elems(g), lse + c.q0, out, lse_blk + c.q0, c.nq, g.hq, g.d, g.Sr, s);
  return rc ? 200 + rc : 0;
}

}  // namespace cuco_attn
#endif  // __cplusplus
