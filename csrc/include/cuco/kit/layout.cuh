// Index and offset arithmetic shared by candidates: chunking of a rank's rows, peer order, flag layouts.
// Everything is __host__ __device__ and free of CUDA calls, so it is unit-tested on the CPU for W = 2, 4, 8
// (tests/test_kit_layout.py), where W = 1 runs could never exercise peer offsets.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifndef __CUDACC__
#define CUCO_KIT_HD
#else
#define CUCO_KIT_HD __host__ __device__
#endif

namespace cuco {
namespace kit {

// A rank's `rows` rows cut into chunks of `chunk_rows` (a multiple of `align_rows`, at least one alignment
// unit, at most all rows); chunk_bytes == 0 means one chunk.
struct Chunking {
  int64_t rows;
  int64_t chunk_rows;
  int nchunks;
};

CUCO_KIT_HD inline Chunking make_chunking(int64_t rows, int64_t chunk_bytes, int64_t row_bytes, int64_t align_rows) {
  int64_t per = rows;  // chunk_bytes == 0: the whole block, whatever its alignment
  if (chunk_bytes) {
    per = chunk_bytes / row_bytes / align_rows * align_rows;
    if (per < align_rows) per = align_rows;
    if (per > rows) per = rows;
  }
  Chunking c;
  c.rows = rows;
  c.chunk_rows = per;
  c.nchunks = per > 0 ? (int)((rows + per - 1) / per) : 0;
  return c;
}

// First row of chunk c, and its row count (the last chunk may be short).
CUCO_KIT_HD inline int64_t chunk_begin(const Chunking& c, int i) { return (int64_t)i * c.chunk_rows; }
CUCO_KIT_HD inline int64_t chunk_len(const Chunking& c, int i) {
  const int64_t left = c.rows - chunk_begin(c, i);
  return left < c.chunk_rows ? left : c.chunk_rows;
}

// Piece i of a rank's `nchunks` chunks copied in doubling pieces (1, 1, 2, 4, 8, ... chunks): chunks [c0, c1).
// A consumer of the first chunk starts after one chunk's copy, and the pieces (copies and their flag updates)
// stay about log2(nchunks) + 1. false once i is past the last piece.
CUCO_KIT_HD inline bool doubling_piece(int nchunks, int i, int* c0, int* c1) {
  int begin = 0, len = 1;
  for (int k = 0; k < i && begin < nchunks; ++k) {
    begin += len;
    if (k > 0) len *= 2;
  }
  if (begin >= nchunks) return false;
  *c0 = begin;
  *c1 = begin + len < nchunks ? begin + len : nchunks;
  return true;
}

// The peer a rank visits at step s (s = 0 is itself): a rotation, so every rank starts on a different peer.
CUCO_KIT_HD inline int peer_at(int me, int step, int world) { return (me + step) % world; }

// Symmetric flags (uint32 epochs written by peers), indexed by the writing rank:
//   ready[W] | done[W] | arrive[W * nchunks]
struct SymFlags {
  int world, nchunks;
  CUCO_KIT_HD size_t ready(int rank) const { return (size_t)rank; }
  CUCO_KIT_HD size_t done(int rank) const { return (size_t)world + rank; }
  CUCO_KIT_HD size_t arrive(int rank, int c) const { return 2 * (size_t)world + (size_t)rank * nchunks + c; }
  CUCO_KIT_HD size_t words() const { return 2 * (size_t)world + (size_t)world * nchunks; }
};

// Local flags (this rank's device memory): chunk[W * nchunks] (chunk landed) | count[W * nchunks] (CTA
// arrivals) | misc[kMisc].
struct LocalFlags {
  static constexpr size_t kMisc = 64;
  int world, nchunks;
  CUCO_KIT_HD size_t chunk(int rank, int c) const { return (size_t)rank * nchunks + c; }
  CUCO_KIT_HD size_t count(int rank, int c) const { return (size_t)world * nchunks + chunk(rank, c); }
  CUCO_KIT_HD size_t misc(int i) const { return 2 * (size_t)world * nchunks + i; }
  CUCO_KIT_HD size_t words() const { return 2 * (size_t)world * nchunks + kMisc; }
};

}  // namespace kit
}  // namespace cuco
