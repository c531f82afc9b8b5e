// Index arithmetic of the KV-transfer workload: roles and pairs, paged-cache and staging offsets, token chunks,
// flag words, seeded block tables. __host__ __device__ and free of CUDA calls, so it is unit-tested on the CPU for
// W = 1, 2, 4, 8 (tests/test_workload_kv_transfer_layout.py), where a W = 1 GPU run never exercises a pair peer.
#pragma once

#include <stdint.h>

#include "cuco/kit/layout.cuh"

namespace cuco_kv {

constexpr int kBlockTokens = 16;   // tokens per page (vLLM's default block size)
constexpr int kHeadDim = 128;
constexpr int kMaxLayers = 256;

// ---- roles: rank 2p prefills and rank 2p+1 decodes (W >= 2, even); W = 1 holds both roles -------------------
enum { ROLE_PREFILL = 1, ROLE_DECODE = 2 };

CUCO_KIT_HD inline int role_of(int rank, int world) {
  return world == 1 ? (ROLE_PREFILL | ROLE_DECODE) : (rank % 2 == 0 ? ROLE_PREFILL : ROLE_DECODE);
}
// The other rank of this rank's pair (itself at W = 1).
CUCO_KIT_HD inline int pair_peer(int rank, int world) { return world == 1 ? rank : (rank ^ 1); }
// The prefill rank whose KV the decode rank `rank` receives.
CUCO_KIT_HD inline int prefill_of(int rank, int world) { return world == 1 ? rank : (rank & ~1); }
// True when the world can be cut into prefill->decode pairs (1, or even).
CUCO_KIT_HD inline bool world_ok(int world) { return world == 1 || (world >= 2 && world % 2 == 0); }

// ---- geometry --------------------------------------------------------------------------------------------
struct Geo {
  int64_t S, D, L;  // tokens, KV width (elements per token per plane), layers
  int64_t nblk;     // logical blocks of the prompt: S / 16
  int64_t pool;     // pages per plane per layer: nblk plus 1/8 spare, so a table is a permutation of a subset
};

CUCO_KIT_HD inline Geo geo_make(int64_t S, int64_t D, int64_t L) {
  Geo g;
  g.S = S, g.D = D, g.L = L;
  g.nblk = S / kBlockTokens;
  g.pool = g.nblk + (g.nblk + 7) / 8;
  return g;
}

// Paged cache [L][2][pool][16][D] (bf16 elements): first element of page `page`, plane kv (0 K, 1 V), layer l.
CUCO_KIT_HD inline int64_t page_elem(const Geo& g, int64_t l, int kv, int64_t page) {
  return ((l * 2 + kv) * g.pool + page) * kBlockTokens * g.D;
}
CUCO_KIT_HD inline int64_t layer_elem(const Geo& g, int64_t l) { return page_elem(g, l, 0, 0); }
CUCO_KIT_HD inline int64_t cache_elems(const Geo& g) { return g.L * 2 * g.pool * kBlockTokens * g.D; }

// Staging [L][2][S][D]: a layer's K and V in logical token order, i.e. pages under the identity table with
// pool = nblk (the receive area of the staged protocols and of the host seed).
CUCO_KIT_HD inline int64_t stage_layer_elem(const Geo& g, int64_t l) { return l * 2 * g.S * g.D; }
CUCO_KIT_HD inline int64_t stage_elems(const Geo& g) { return g.L * 2 * g.S * g.D; }

// Block tables: every rank's buffer holds its prefill table [nblk] then its decode table [nblk] (int32 pages).
CUCO_KIT_HD inline int64_t ptab_word(const Geo&, int64_t b) { return b; }
CUCO_KIT_HD inline int64_t dtab_word(const Geo& g, int64_t b) { return g.nblk + b; }

// A layer's tokens in chunks of whole blocks (chunk_bytes of K and V together; 0 = the whole layer).
CUCO_KIT_HD inline cuco::kit::Chunking token_chunks(const Geo& g, int64_t chunk_bytes) {
  return cuco::kit::make_chunking(g.S, chunk_bytes, 2 * g.D * 2, kBlockTokens);
}

// Blocks [first, end) of chunk c of a layer's tokens (chunks hold whole blocks).
CUCO_KIT_HD inline int64_t chunk_first_block(const cuco::kit::Chunking& ch, int c) {
  return cuco::kit::chunk_begin(ch, c) / kBlockTokens;
}
CUCO_KIT_HD inline int64_t chunk_end_block(const cuco::kit::Chunking& ch, int c) {
  return (cuco::kit::chunk_begin(ch, c) + cuco::kit::chunk_len(ch, c)) / kBlockTokens;
}

// Arrival flags (uint32 epochs in the decode rank's symmetric workspace, written by its prefill rank):
// arrived[L * nchunks] | done (the decode rank's "staging consumed", written into the prefill rank's copy).
struct Flags {
  int64_t L;
  int nchunks;
  CUCO_KIT_HD int64_t arrived(int64_t l, int c) const { return l * nchunks + c; }
  CUCO_KIT_HD int64_t done() const { return L * nchunks; }
  CUCO_KIT_HD int64_t words() const { return L * nchunks + 1; }
};

// ---- seeded block tables (host) ----------------------------------------------------------------------------
inline uint64_t table_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The block table `which` (0 prefill, 1 decode) of `rank` for `seed`: the first nblk entries of a seeded
// Fisher-Yates permutation of the pool's pages, so distinct, in [0, pool), and different for every (rank, which).
// `scratch` holds pool ints.
inline void make_table(const Geo& g, uint64_t seed, int rank, int which, int32_t* table, int32_t* scratch) {
  for (int64_t p = 0; p < g.pool; ++p) scratch[p] = (int32_t)p;
  uint64_t s = table_mix(seed * 0x100000001B3ull ^ ((uint64_t)rank << 8) ^ (uint64_t)which);
  for (int64_t i = g.pool - 1; i > 0; --i) {
    s = table_mix(s);
    const int64_t j = (int64_t)(s % (uint64_t)(i + 1));
    const int32_t t = scratch[i];
    scratch[i] = scratch[j];
    scratch[j] = t;
  }
  for (int64_t b = 0; b < g.nblk; ++b) table[b] = scratch[b];
}

}  // namespace cuco_kv
