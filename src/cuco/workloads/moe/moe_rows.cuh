// MoE device code that moves rows: the dispatch's row copies (bf16, or fp8 dequantised on receive), gathers and
// pushes, the chunk pipeline's gather, the exchange-alone stores, and the gate-weighted combine. Shared by the
// plugin and every rendered candidate (inlined after moe_dev.cuh into its frozen head).
#pragma once

#include "moe_dev.cuh"

namespace cuco_moe {

// ---- moving rows -------------------------------------------------------------------------------------------

// Issuer groups: kGroup threads move one row (1: a thread, 32: a warp, 0: the whole CTA).
template <int kGroup>
struct Rows {
  __device__ static int size() { return kGroup ? kGroup : (int)blockDim.x; }
  __device__ static int64_t group() {
    return kGroup ? (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / kGroup : (int64_t)blockIdx.x;
  }
  __device__ static int64_t groups() { return kGroup ? (int64_t)gridDim.x * blockDim.x / kGroup : gridDim.x; }
  __device__ static int lane() { return kGroup ? (int)(threadIdx.x % kGroup) : (int)threadIdx.x; }
};

// 16-byte words in flight per thread in a row copy, dequantisation or combine: one load at a time per thread
// leaves NVLink's latency uncovered (a whole-CTA row of H = 7168 is 3.5 words per thread of 256; MoE's dispatch
// ran at 110-130 GB/s of 347 at the paper shapes). Loads first, then stores: the destination may not alias the
// source, so the compiler keeps them in flight together.
constexpr int kRowUnroll = 4;

// One bf16 row of H channels: 16-byte words, kRowUnroll per thread in flight.
template <int kGroup>
__device__ inline void copy_row(__nv_bfloat16* __restrict__ dst, const __nv_bfloat16* __restrict__ src, int64_t H) {
  const int4* s = reinterpret_cast<const int4*>(src);
  int4* d = reinterpret_cast<int4*>(dst);
  const int64_t n = H / 8, lanes = Rows<kGroup>::size(), lane = Rows<kGroup>::lane();
  for (int64_t base = lane; base < n; base += lanes * kRowUnroll) {
    int4 v[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u)
      if (base + u * lanes < n) v[u] = __ldcg(s + base + u * lanes);
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u)
      if (base + u * lanes < n) d[base + u * lanes] = v[u];
  }
}

// Rows one issuer group keeps in flight at once in the dispatch's gathers and pushes. One row at a time left a
// 16-CTA pull kernel beside the FFN at about 10 GB/s per SM (the fused point's chunk gather: 358 us for 59 MB at
// W = 1 on one H200, against 32 us for the same rows on every SM; 279 us with four): a CTA's one row of H = 7168
// is 14 KB in flight.
constexpr int kRowBatch = 4;
// 16-byte words per thread per trip in copy_rows (the gathers and pushes; single rows, fp8 and the combine keep
// kRowUnroll, the same 4): apart so that benchmarks/moe_gather_variants.py can vary it alone
constexpr int kGatherUnroll = 4;

// Up to kRowBatch bf16 rows of H channels copied together (src[b] == nullptr: no row b): every row's
// kGatherUnroll words per thread are loaded before any is stored.
template <int kGroup>
__device__ inline void copy_rows(__nv_bfloat16* const (&dst)[kRowBatch], const __nv_bfloat16* const (&src)[kRowBatch],
                                 int64_t H) {
  const int64_t n = H / 8, lanes = Rows<kGroup>::size(), lane = Rows<kGroup>::lane();
  for (int64_t base = lane; base < n; base += lanes * kGatherUnroll) {
    int4 v[kRowBatch][kGatherUnroll];
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b)
#pragma unroll
      for (int u = 0; u < kGatherUnroll; ++u)
        if (src[b] && base + u * lanes < n) v[b][u] = __ldcg(reinterpret_cast<const int4*>(src[b]) + base + u * lanes);
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b)
#pragma unroll
      for (int u = 0; u < kGatherUnroll; ++u)
        if (src[b] && base + u * lanes < n) reinterpret_cast<int4*>(dst[b])[base + u * lanes] = v[b][u];
  }
}

// Items first, first + stride, ... below end, kRowBatch of them at a time: row_at(i, dst, src) names item i's row
// copy, or returns false for an item that moves nothing.
template <int kGroup, class RowAt>
__device__ inline void copy_rows_strided(int64_t first, int64_t end, int64_t stride, int64_t H, RowAt row_at) {
  for (int64_t i0 = first; i0 < end; i0 += stride * kRowBatch) {
    __nv_bfloat16* dst[kRowBatch];
    const __nv_bfloat16* src[kRowBatch];
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      const int64_t i = i0 + b * stride;
      src[b] = nullptr;
      dst[b] = nullptr;
      if (i < end && !row_at(i, dst[b], src[b])) src[b] = nullptr;
    }
    copy_rows<kGroup>(dst, src, H);
  }
}

// One fp8 row with its scales, dequantised to bf16: 8 channels per word, kRowUnroll words per thread in flight.
template <int kGroup>
__device__ inline void dequant_row(__nv_bfloat16* __restrict__ dst, const __nv_fp8_e4m3* __restrict__ q,
                                   const float* __restrict__ scales, int64_t H) {
  const int64_t n = H / 8, lanes = Rows<kGroup>::size(), lane = Rows<kGroup>::lane();
  for (int64_t base = lane; base < n; base += lanes * kRowUnroll) {
    uint2 raw[kRowUnroll];
    float s[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const int64_t w = base + u * lanes;
      if (w < n) raw[u] = __ldcg(reinterpret_cast<const uint2*>(q) + w), s[u] = __ldcg(scales + (w * 8) / kScaleBlock);
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const int64_t w = base + u * lanes;
      if (w >= n) continue;
      const __nv_fp8_e4m3* v = reinterpret_cast<const __nv_fp8_e4m3*>(&raw[u]);
      __align__(16) __nv_bfloat16 out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = __float2bfloat16(float(v[i]) * s[u]);
      reinterpret_cast<int4*>(dst)[w] = *reinterpret_cast<const int4*>(out);
    }
  }
}

// Pull rows [lo, hi) of the row space (clipped to the rows received) from their sources' tokens.
// kFp8: read the sources' e4m3 copies and scales and dequantise. stage (copy engine): sources' X already copied
// into the local staging area, one T x H block per source.
// sources: SRC_ALL, SRC_OWN (this rank's tokens only) or SRC_PEERS (the other ranks' tokens only).
enum { SRC_ALL = 0, SRC_OWN = 1, SRC_PEERS = 2 };

template <int kGroup, bool kFp8>
__device__ inline void gather_rows(const Geo& g, const PeerBases& x, const PeerBases& pub, const PubLayout& P,
                                   const int64_t* rowmap, int64_t lo, int64_t hi, int sources,
                                   const __nv_bfloat16* stage, __nv_bfloat16* recv, int64_t group,
                                   int64_t groups) {
  if (kFp8) {
    for (int64_t r = lo + group; r < hi; r += groups) {
      const int64_t m = rowmap[r];
      const int p = (int)(m >> 32);
      if ((sources == SRC_OWN && p != g.me) || (sources == SRC_PEERS && p == g.me)) continue;
      const int64_t t = (m & 0xffffffffll) / g.K;
      dequant_row<kGroup>(recv + r * g.H, reinterpret_cast<const __nv_fp8_e4m3*>(pub.p[p] + P.xq) + t * g.H,
                          reinterpret_cast<const float*>(pub.p[p] + P.xs) + t * (g.H / kScaleBlock), g.H);
    }
    return;
  }
  copy_rows_strided<kGroup>(lo + group, hi, groups, g.H,
                            [&](int64_t r, __nv_bfloat16*& dst, const __nv_bfloat16*& src) {
    const int64_t m = rowmap[r];
    const int p = (int)(m >> 32);
    if ((sources == SRC_OWN && p != g.me) || (sources == SRC_PEERS && p == g.me)) return false;
    const int64_t t = (m & 0xffffffffll) / g.K;
    dst = recv + r * g.H;
    src = stage ? stage + ((int64_t)p * g.T + t) * g.H : reinterpret_cast<const __nv_bfloat16*>(x.p[p]) + t * g.H;
    return true;
  });
}

template <int kGroup, bool kFp8>
__global__ void gather_kernel(Geo g, PeerBases x, PeerBases pub, PubLayout P, const int64_t* rowmap,
                              const int64_t* total, int sources, const __nv_bfloat16* stage, __nv_bfloat16* recv) {
  gather_rows<kGroup, kFp8>(g, x, pub, P, rowmap, 0, *total, sources, stage, recv, Rows<kGroup>::group(),
                            Rows<kGroup>::groups());
}

// Chunk pipeline: rows [c*chunk_rows, (c+1)*chunk_rows) chunk after chunk; the last CTA to finish a chunk
// publishes flag[c] = epoch (counters self-reset). Every chunk up to nchunks gets its flag, empty ones too. The
// epoch is read from the device word at epoch_at (written by an earlier kernel of the launch: graph-safe).
template <int kGroup, bool kFp8>
__global__ void gather_chunks_kernel(Geo g, PeerBases x, PeerBases pub, PubLayout P, const int64_t* rowmap,
                                     const int64_t* total, int64_t chunk_rows, int nchunks, uint32_t* counter,
                                     uint32_t* flag, const uint32_t* epoch_at, __nv_bfloat16* recv) {
  const uint32_t epoch = *epoch_at;
  const int64_t n = *total;
  for (int c = 0; c < nchunks; ++c) {
    const int64_t lo = c * chunk_rows, hi = lo + chunk_rows < n ? lo + chunk_rows : n;
    gather_rows<kGroup, kFp8>(g, x, pub, P, rowmap, lo, hi, SRC_ALL, nullptr, recv, Rows<kGroup>::group(),
                              Rows<kGroup>::groups());
    if (cuco::lsa::cta_arrive_last(counter + c, gridDim.x)) cuco::lsa::store_release_sys(flag + c, epoch);
  }
}

// Push this rank's slots into their owners' receive rows (split_put_wait). own: only slots of this rank's
// experts (1), only the others (0).
template <int kGroup>
__global__ void push_kernel(Geo g, const __nv_bfloat16* x, const int32_t* expert, const int32_t* slot_rank,
                            const int64_t* cbase, PeerBases pub, PubLayout P, int own) {
  copy_rows_strided<kGroup>(Rows<kGroup>::group(), g.slots, Rows<kGroup>::groups(), g.H,
                            [&](int64_t j, __nv_bfloat16*& dst, const __nv_bfloat16*& src) {
    const int64_t ge = expert[j];
    const int q = (int)(ge / g.El);
    if ((q == g.me) != (own != 0)) return false;
    dst = reinterpret_cast<__nv_bfloat16*>(pub.p[q] + P.recv) + (cbase[ge] + slot_rank[j]) * g.H;
    src = x + (j / g.K) * g.H;
    return true;
  });
}

// The exchange alone (no FFN, benchmarks/moe.py): the peers' received rows themselves stored at their sources'
// back rows, the bytes the down GEMM's epilogue would store there; one CTA per row.
__global__ void segment_put_kernel(Geo g, const __nv_bfloat16* recv, const int32_t* seg_rows,
                                   const int64_t* seg_off, void* const* seg_out) {
  for (int64_t i = 0; i < g.El * g.W; ++i)
    for (int64_t r = blockIdx.x; r < seg_rows[i]; r += gridDim.x)
      copy_row<0>(reinterpret_cast<__nv_bfloat16*>(seg_out[i]) + r * g.H, recv + (seg_off[i] + r) * g.H, g.H);
}

// Y[t] = sum_j gate[t, j] * (expert output of slot (t, j)), pulled from the experts' owners, or read from `back`
// (order layout: row ostart[expert] + slot_rank) for slots at other ranks where their owners stored them (back:
// nullptr otherwise); fp32 sum in slot order, bf16 out. Each thread keeps kRowUnroll words of a slot's row in
// flight.
__global__ void combine_kernel(Geo g, const int32_t* expert, const float* gate, const int32_t* slot_rank,
                               const int64_t* cbase, PeerBases pub, PubLayout P, const __nv_bfloat16* back,
                               const int64_t* ostart, __nv_bfloat16* __restrict__ y) {
  const int64_t n = g.H / 8, lanes = blockDim.x;
  for (int64_t t = blockIdx.x; t < g.T; t += gridDim.x) {
    for (int64_t base = threadIdx.x; base < n; base += lanes * kRowUnroll) {
      float acc[kRowUnroll][8] = {};
      for (int64_t k = 0; k < g.K; ++k) {
        const int64_t j = t * g.K + k, ge = expert[j];
        const int q = (int)(ge / g.El);
        const __nv_bfloat16* at_owner =
            reinterpret_cast<const __nv_bfloat16*>(pub.p[q] + P.yrows) + (cbase[ge] + slot_rank[j]) * g.H;
        const int4* row = reinterpret_cast<const int4*>(
            back && q != g.me ? back + (ostart[ge] + slot_rank[j]) * g.H : at_owner);
        const float gw = gate[j];
        int4 raw[kRowUnroll];
#pragma unroll
        for (int u = 0; u < kRowUnroll; ++u)
          if (base + u * lanes < n) raw[u] = __ldcg(row + base + u * lanes);
#pragma unroll
        for (int u = 0; u < kRowUnroll; ++u) {
          if (base + u * lanes >= n) continue;
          const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(&raw[u]);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[u][i] += gw * __bfloat162float(v[i]);
        }
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        if (base + u * lanes >= n) continue;
        __align__(16) __nv_bfloat16 out[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) out[i] = __float2bfloat16(acc[u][i]);
        reinterpret_cast<int4*>(y + t * g.H)[base + u * lanes] = *reinterpret_cast<const int4*>(out);
      }
    }
  }
}

}  // namespace cuco_moe
