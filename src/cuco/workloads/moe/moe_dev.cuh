// MoE device code shared by the plugin (dispatch+combine part) and every rendered candidate (inlined into its
// frozen head): buffer layouts, the routing tables, peers' addresses and the row map. The kernels that move rows
// (dispatch, combine) are in moe_rows.cuh.
//
// Receive layout on rank q ("row space"): rows grouped by q's local expert e (experts in order), within an expert
// by source rank in the order q, q+1, ..., q-1 (own tokens first, so local rows can be computed first); within a
// segment (e, p) in the order of p's slots for that expert (its order list). Order layout on rank p: p's slots
// sorted by expert, as its order list; segment (e, p) of owner q is the run of p's order rows of expert q*El + e.
// Everything a rank needs to address any peer's rows follows from the public slot counts cnt_p[E] of all ranks.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuco/lsa.cuh"

namespace cuco_moe {

// Buffer indices (the plugin's order). dims = T, H, I, E, K, R.
enum { BUF_X = 0, BUF_EXPERT = 1, BUF_GATE = 2, BUF_W1 = 3, BUF_W2 = 4, BUF_Y = 5, BUF_PUB = 6, BUF_WORK = 7,
       NBUF = 8 };
constexpr int kScaleBlock = 128;  // fp8 dispatch: one fp32 scale per 128 channels of a token (as DeepSeek-V3)
constexpr float kFp8Max = 448.0f;  // largest finite e4m3 value
constexpr int kMaxExperts = 1024;  // route_kernel keeps per-expert counters in shared memory

struct Geo {
  int64_t T, H, I, E, K, R;
  int W, me;
  int64_t El;        // experts per rank
  int64_t slots;     // T * K
  int64_t rows_cap;  // rows a rank can receive at most (host-computable bound, see rows_bound)
};

__host__ __device__ inline int64_t align256(int64_t b) { return (b + 255) / 256 * 256; }

// Largest number of rows rank q can receive: expert 0 (on rank 0) takes floor(S*R/(R+E-1)) slots of every
// source, any other expert at most floor(S/(R+E-1)) + 1.
__host__ __device__ inline int64_t rows_bound(int64_t T, int64_t E, int64_t K, int64_t R, int W, int q) {
  const int64_t S = T * K, tot = R + E - 1, c0 = S * R / tot, other = S / tot + 1, El = E / W;
  int64_t per_source = q == 0 ? c0 + (El - 1) * other : El * other;
  if (per_source > S) per_source = S;
  return per_source * W;
}

__host__ __device__ inline Geo geo_make(const int64_t* d, int W, int me) {
  Geo g;
  g.T = d[0], g.H = d[1], g.I = d[2], g.E = d[3], g.K = d[4], g.R = d[5];
  g.W = W, g.me = me;
  g.El = g.E / W;
  g.slots = g.T * g.K;
  g.rows_cap = 0;
  for (int q = 0; q < W; ++q) {
    int64_t b = rows_bound(g.T, g.E, g.K, g.R, W, q);
    g.rows_cap = b > g.rows_cap ? b : g.rows_cap;
  }
  return g;
}

// ---- symmetric "pub" buffer: what peers read (or write, for pushes) ----------------------------------------
struct PubLayout {
  int64_t cnt, order, xq, xs, recv, yrows, cnt_all, rowslot, back, stage, bytes;
};
__host__ __device__ inline PubLayout pub_layout(const Geo& g) {
  PubLayout L;
  int64_t o = 0;
  L.cnt = o;   o += align256(4 * g.E);                      // int32 slots per global expert
  L.order = o; o += align256(4 * g.slots);                  // int32 slot ids sorted by expert
  L.xq = o;    o += align256(g.T * g.H);                    // e4m3 tokens (fp8 dispatch)
  L.xs = o;    o += align256(4 * g.T * (g.H / kScaleBlock));  // their scales
  L.recv = o;  o += align256(2 * g.rows_cap * g.H);         // received rows (bf16)
  L.yrows = o; o += align256(2 * g.rows_cap * g.H);         // expert outputs of those rows (bf16)
  // backend=gin (no peer loads: everything arrives by put): every rank's counts, the source slot of each
  // received row. back: this rank's slots' expert outputs at other ranks, stored here by their owners (GIN and
  // NVSHMEM: slot order; LSA stream_overlap: order layout, by the owners' down-GEMM epilogues).
  L.cnt_all = o; o += align256(4 * g.W * g.E);
  L.rowslot = o; o += align256(4 * g.rows_cap);
  L.back = o;    o += align256(2 * g.slots * g.H);
  // copy-engine staging: every rank's X, block p written by rank p's pushes (stream_overlap) or pulled here
  L.stage = o;   o += align256(2 * (int64_t)g.W * g.T * g.H);
  L.bytes = o;
  return L;
}

// ---- local "work" buffer: FFN scratch and the routing tables of this launch ----------------------------------
// FFN group sets of the received rows (the `which` of an FFN call), each El groups: every row; own tokens' rows;
// peers' rows.
enum { GROUPS_ALL = 0, GROUPS_OWN = 1, GROUPS_PEERS = 2, kGroupSets = 3 };

struct WorkLayout {
  int64_t h1, act, slot_rank, cnt_all, seg_off, grp_rows, grp_off, grp_exp, cbase, rowmap, total, seg_rows, seg_exp,
      seg_out, ostart, bytes;
};
__host__ __device__ inline WorkLayout work_layout(const Geo& g) {
  WorkLayout L;
  int64_t o = 0;
  L.h1 = o;        o += align256(2 * g.rows_cap * 2 * g.I);
  L.act = o;       o += align256(2 * g.rows_cap * g.I);
  L.slot_rank = o; o += align256(4 * g.slots);              // position of a slot within its expert's list
  L.cnt_all = o;   o += align256(4 * g.W * g.E);            // every rank's cnt
  L.seg_off = o;   o += align256(8 * g.El * g.W);           // row of segment (local expert e, source p)
  // FFN groups: [all | own rows | peers' rows]
  L.grp_rows = o;  o += align256(4 * kGroupSets * g.El);
  L.grp_off = o;   o += align256(8 * kGroupSets * g.El);
  L.grp_exp = o;   o += align256(4 * g.El);
  L.cbase = o;     o += align256(8 * g.E);                  // row at expert g's owner of this rank's segment
  L.rowmap = o;    o += align256(8 * g.rows_cap);           // row -> (source << 32 | slot)
  L.total = o;     o += 256;                                // int64 rows received
  // FFN groups by segment (e, p), p != me: the peers' rows, each group's outputs stored at its source (seg_out: the
  // rows in the source's back, order layout; nullptr for the own segments, whose rows are 0)
  L.seg_rows = o;  o += align256(4 * g.El * g.W);
  L.seg_exp = o;   o += align256(4 * g.El * g.W);
  L.seg_out = o;   o += align256(8 * g.El * g.W);
  L.ostart = o;    o += align256(8 * g.E);                  // row of expert g's first slot in this rank's order
  L.bytes = o;
  return L;
}

// Row offset of segment (local expert e, source p) on rank q, from the counts of all ranks (cnt_all[p*E + g]).
__host__ __device__ inline int64_t segment_offset(const int32_t* cnt_all, int64_t E, int W, int q, int64_t e, int p) {
  const int64_t El = E / W;
  int64_t off = 0;
  for (int64_t f = 0; f < e; ++f)
    for (int s = 0; s < W; ++s) off += cnt_all[(int64_t)s * E + q * El + f];
  for (int i = 0; i < W; ++i) {
    const int s = (q + i) % W;
    if (s == p) break;
    off += cnt_all[(int64_t)s * E + q * El + e];
  }
  return off;
}

// Row of expert ge's first slot in rank p's order list (and in p's back, order layout).
__host__ __device__ inline int64_t order_start(const int32_t* cnt_all, int64_t E, int p, int64_t ge) {
  int64_t start = 0;
  for (int64_t f = 0; f < ge; ++f) start += cnt_all[(int64_t)p * E + f];
  return start;
}

// ---- routing tables ----------------------------------------------------------------------------------------

// One CTA: cnt[E] of this rank's slots, order[] (slot ids grouped by expert) and slot_rank[] (a slot's place in
// its expert's group). Expert lists are in slot order within a warp's atomics: any order works, because
// dispatch and combine both read it from the same tables.
__global__ void route_kernel(const int32_t* expert, int64_t slots, int64_t E, int32_t* cnt, int32_t* order,
                             int32_t* slot_rank) {
  __shared__ int32_t c[kMaxExperts], start[kMaxExperts];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) c[e] = 0;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) slot_rank[j] = atomicAdd(&c[expert[j]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t s = 0;
    for (int64_t e = 0; e < E; ++e) start[e] = s, s += c[e];
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = c[e];
  for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) order[start[expert[j]] + slot_rank[j]] = (int32_t)j;
}

// Per-128-channel e4m3 quantisation of this rank's tokens: one warp per (token, block of 128 channels).
__global__ void quant_kernel(const __nv_bfloat16* x, int64_t T, int64_t H, __nv_fp8_e4m3* xq, float* xs) {
  const int lane = threadIdx.x & 31;
  const int64_t blocks = H / kScaleBlock;
  for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < T * blocks;
       w += (int64_t)gridDim.x * blockDim.x / 32) {
    const int64_t t = w / blocks, b = w % blocks;
    const __nv_bfloat16* src = x + t * H + b * kScaleBlock + lane * 4;
    float v[4], m = 0.f;
    for (int i = 0; i < 4; ++i) v[i] = __bfloat162float(src[i]), m = fmaxf(m, fabsf(v[i]));
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float scale = m > 0.f ? m / kFp8Max : 1.f;
    for (int i = 0; i < 4; ++i) xq[t * H + b * kScaleBlock + lane * 4 + i] = __nv_fp8_e4m3(v[i] / scale);
    if (lane == 0) xs[t * blocks + b] = scale;
  }
}

// Receiver tables from every rank's counts (cnt_all already gathered): segment offsets, FFN groups (the
// kGroupSets sets per local expert), the combine bases of this rank's segments at every owner, the total, and where
// this rank's experts start in its own order (ostart).
__global__ void plan_kernel(Geo g, const int32_t* cnt_all, int64_t* seg_off, int32_t* grp_rows, int64_t* grp_off,
                            int32_t* grp_exp, int64_t* cbase, int64_t* ostart, int64_t* total) {
  for (int64_t i = threadIdx.x; i < g.El * g.W; i += blockDim.x) {
    const int64_t e = i / g.W;
    const int p = (int)(i % g.W);
    seg_off[i] = segment_offset(cnt_all, g.E, g.W, g.me, e, p);
  }
  for (int64_t e = threadIdx.x; e < g.El; e += blockDim.x) {
    const int64_t base = segment_offset(cnt_all, g.E, g.W, g.me, e, g.me);
    int32_t all = 0;
    for (int s = 0; s < g.W; ++s) all += cnt_all[(int64_t)s * g.E + g.me * g.El + e];
    const int32_t own = cnt_all[(int64_t)g.me * g.E + g.me * g.El + e];
    grp_rows[e] = all, grp_off[e] = base;
    grp_rows[g.El + e] = own, grp_off[g.El + e] = base;
    grp_rows[2 * g.El + e] = all - own, grp_off[2 * g.El + e] = base + own;
    grp_exp[e] = (int32_t)e;
  }
  for (int64_t x = threadIdx.x; x < g.E; x += blockDim.x) {
    const int q = (int)(x / g.El);
    cbase[x] = segment_offset(cnt_all, g.E, g.W, q, x % g.El, g.me);
    ostart[x] = order_start(cnt_all, g.E, g.me, x);
  }
  if (threadIdx.x == 0) {
    int64_t n = 0;
    for (int s = 0; s < g.W; ++s)
      for (int64_t e = 0; e < g.El; ++e) n += cnt_all[(int64_t)s * g.E + g.me * g.El + e];
    *total = n;
  }
}

// ---- peers and the row map -----------------------------------------------------------------------------------

// Peers' base addresses of one symmetric window (index: world rank; this rank's own address included).
constexpr int kMaxWorld = 72;  // one NVLink domain at most
struct PeerBases {
  char* p[kMaxWorld];
};

// rowmap[r] for every received row: which source and which of its slots (reads peers' order lists); and the FFN
// groups by segment whose outputs go straight to their sources (seg_rows, seg_exp, seg_out: rows of segment (e, p)
// land in p's back at the rows of its order list, where p's combine reads them).
__global__ void rowmap_kernel(Geo g, PeerBases pub, PubLayout P, const int32_t* cnt_all, const int64_t* seg_off,
                              int64_t* rowmap, int32_t* seg_rows, int32_t* seg_exp, void** seg_out) {
  for (int64_t i = blockIdx.x; i < g.El * g.W; i += gridDim.x) {
    const int64_t e = i / g.W;
    const int p = (int)(i % g.W);
    const int64_t ge = g.me * g.El + e;
    const int64_t start = order_start(cnt_all, g.E, p, ge);
    const int32_t n = cnt_all[(int64_t)p * g.E + ge];
    if (threadIdx.x == 0) {
      seg_rows[i] = p == g.me ? 0 : n;
      seg_exp[i] = (int32_t)e;
      seg_out[i] = p == g.me ? nullptr : pub.p[p] + P.back + start * g.H * 2;
    }
    const int32_t* order = reinterpret_cast<const int32_t*>(pub.p[p] + P.order);
    for (int32_t k = threadIdx.x; k < n; k += blockDim.x)
      rowmap[seg_off[i] + k] = ((int64_t)p << 32) | (int64_t)__ldcg(order + start + k);
  }
}

// Copy every rank's cnt[E] into cnt_all (one CTA).
__global__ void gather_counts_kernel(Geo g, PeerBases pub, PubLayout P, int32_t* cnt_all) {
  for (int64_t i = threadIdx.x; i < (int64_t)g.W * g.E; i += blockDim.x)
    cnt_all[i] = __ldcg(reinterpret_cast<const int32_t*>(pub.p[i / g.E] + P.cnt) + i % g.E);
}

}  // namespace cuco_moe
