// cuco fast path: index arithmetic of the design point's paths, shared by host and device and free of CUDA
// and NCCL types, so that the CPU tests compile it with g++ (tests/test_fastpath_layout.py): who signals whom
// at sync_scope=signal, where those flags live in the mailbox, how issuer=copy_engine cuts transfers into
// chunks and spreads them over copy streams, and in which order ranks read one another.
#pragma once
#include <cstddef>
#ifndef __CUDACC__
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#endif

namespace cucofp {

// ---- which 16-byte chunks a thread of a grid-strided loop owns --------------------------------------------
// Chunk c belongs to thread c mod nth (nth: the grid's threads), in every copy and reduction, so a kernel's phases
// and the per-CTA flags between ranks agree on who wrote what. The first chunk at or after `from` that thread
// `tid` owns (where a loop's predicated vector groups end, its tail begins).
__host__ __device__ inline size_t firstOwnedFrom(size_t from, size_t tid, size_t nth) {
  return from + (tid + nth - from % nth) % nth;
}

// ---- who reads whom in a movement collective (AllGather, AlltoAll, Broadcast) ----------------------------
// Bit p of a mask is rank p (communicators hold at most 64 ranks). A rank counts as its own source and reader
// in AllGather and AlltoAll: its own descriptor goes through its mailbox like a peer's. In a Broadcast
// (`rooted`) every rank but the root reads the root, and the root reads nobody.
__host__ __device__ inline unsigned long long allRanks(int nranks) {
  return nranks >= 64 ? ~0ull : ((1ull << nranks) - 1);
}
__host__ __device__ inline unsigned long long sourcesOf(bool rooted, int nranks, int me, int root) {
  if (!rooted) return allRanks(nranks);
  return me == root ? 0ull : 1ull << root;
}
__host__ __device__ inline unsigned long long readersOf(bool rooted, int nranks, int me, int root) {
  if (!rooted) return allRanks(nranks);
  return me == root ? allRanks(nranks) & ~(1ull << root) : 0ull;
}

// ---- signal flags (sync_scope=signal), after the mailbox's descriptors and acknowledgements --------------
// ready[sender][cta]: the sequence number of the last collective whose buffers `sender` published to this
// rank; done[reader][cta]: the last one in which `reader` finished reading this rank's buffers. Offsets are
// in bytes from the start of the flag area; CTA c of a kernel meets CTA c of its peers, as at a barrier.
__host__ __device__ inline size_t signalFlagBytes(int nranks, int ctas) {
  return 2 * (size_t)nranks * (size_t)ctas * sizeof(unsigned int);
}
__host__ __device__ inline size_t readyFlagOffset(int /*nranks*/, int ctas, int sender, int cta) {
  return ((size_t)sender * ctas + cta) * sizeof(unsigned int);
}
__host__ __device__ inline size_t doneFlagOffset(int nranks, int ctas, int reader, int cta) {
  return ((size_t)nranks * ctas + (size_t)reader * ctas + cta) * sizeof(unsigned int);
}
// `a` is sequence number `b` or a later one (wrap-around safe).
__host__ __device__ inline bool seqReached(unsigned int a, unsigned int b) { return (int)(a - b) >= 0; }

// ---- push reductions (AllReduce, ReduceScatter): staging and flags, after the signal flags ---------------
// Each rank stores its send buffer (or the receiver's slice) into every peer's staging slot [slot][sender] and
// raises the flag [slot][sender][cta] there; the receiver reduces its own and the W - 1 staged ones locally.
// Consecutive pushes alternate slots, so no barrier guards a slot's reuse (lsa_push.cuh says why that is safe).
// Both slots together hold 2 x kPushSlotBytes per rank whatever W: a buffer of up to kPushSlotBytes / W is pushed.
constexpr size_t kPushSlotBytes = (size_t)4 << 20;
__host__ __device__ inline size_t pushMaxBytes(int nranks) { return kPushSlotBytes / (size_t)nranks / 256 * 256; }
__host__ __device__ inline size_t pushFlagBytes(int nranks, int ctas) {
  return 2 * (size_t)nranks * (size_t)ctas * sizeof(unsigned int);
}
__host__ __device__ inline size_t pushFlagOffset(int nranks, int ctas, int slot, int sender, int cta) {
  return (((size_t)slot * nranks + sender) * ctas + cta) * sizeof(unsigned int);
}
// Offsets of the staged buffers from the start of the staging area (which starts 256-byte aligned).
__host__ __device__ inline size_t pushStagingOffset(int nranks, int slot, int sender) {
  return ((size_t)slot * nranks + sender) * pushMaxBytes(nranks);
}
__host__ __device__ inline size_t pushStagingBytes(int nranks) { return 2 * (size_t)nranks * pushMaxBytes(nranks); }

// ---- copy-engine chunks (issuer=copy_engine, chunk_bytes) -----------------------------------------------
// chunk = 0 is the whole transfer in one copy. Chunk k covers [chunkOffset, chunkOffset + chunkLength).
__host__ __device__ inline size_t chunkCount(size_t bytes, size_t chunk) {
  if (bytes == 0) return 0;
  return chunk == 0 ? 1 : (bytes + chunk - 1) / chunk;
}
__host__ __device__ inline size_t chunkOffset(size_t chunk, size_t k) { return chunk * k; }
__host__ __device__ inline size_t chunkLength(size_t bytes, size_t chunk, size_t k) {
  if (chunk == 0) return k == 0 ? bytes : 0;
  size_t off = chunk * k;
  return off >= bytes ? 0 : (bytes - off < chunk ? bytes - off : chunk);
}
// The copy stream of chunk k of the t-th transfer (one transfer per source rank): consecutive chunks of one
// transfer, and the first chunks of consecutive transfers, go to different streams, so several copy engines
// (and NVLink peers) are busy at once and no transfer waits behind another's whole length.
__host__ __device__ inline int copyStreamOf(int transfer, size_t k, int streams) {
  return (int)(((size_t)transfer + k) % (size_t)streams);
}

// ---- who is read when, and which slice a rank reduces ----------------------------------------------------
// The peer a rank reads at step i of a gather (and its i-th source in a reduction only it computes): its own
// rank first, then the next ranks in turn. At every step the ranks read distinct peers (a permutation), where
// ranks that all began with rank 0 had every reader on one peer's outbound links at once (at W = 4 the
// AllReduce's gather phase moved 171 GB/s into each rank).
__host__ __device__ inline int staggered(int i, int me, int nr) { return (me + i) % nr; }
// Slice k of `parts` slices of `count` elements is [reduceSliceBegin(k), reduceSliceBegin(k + 1)): slices start on
// whole chunks of `v` elements (16 bytes), so every slice moves as vectors, and together they tile [0, count) in
// order.
__host__ __device__ inline size_t reduceSliceBegin(size_t count, size_t v, int parts, int k) {
  size_t units = (count + v - 1) / v, at = units * (size_t)k / (size_t)parts * v;
  return at < count ? at : count;
}
// Who reduces which slice in the Reduce to a root. From three ranks on the root reduces none and the other W - 1
// share the buffer (slice k to the k-th rank after the root): each reads the root's send over the root's outbound
// links and stores its sums into the root, so exactly one buffer enters the root, where slices over all W ranks
// brought 2(W-1)/W of one in (1.5 at W = 4) and rank-0-reads-all brought W - 1. With two ranks both share it
// (one buffer into the root either way, and both ranks' SMs work). -1: no slice.
__host__ __device__ inline int reduceSliceParts(int nr) { return nr > 2 ? nr - 1 : nr; }
__host__ __device__ inline int reduceSliceOf(int nr, int me, int root) {
  if (nr <= 2) return me;
  return me == root ? -1 : (me - root - 1 + nr) % nr;
}

}  // namespace cucofp
