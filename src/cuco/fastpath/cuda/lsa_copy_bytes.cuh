// cuco fast path: the grid-strided byte copy every copying kernel uses (gathers, AlltoAll, Broadcast, push),
// free of NCCL types so that the CPU tests compile it with g++ and run it thread by thread
// (tests/test_fastpath_layout.py: a copy of any size, alignment and number of destinations writes every byte once,
// from the thread that owns its chunk).
#pragma once
#include <cstddef>
#include <cstdint>
#include "lsa_layout.cuh"

namespace cucofp {

// Grid-strided copy of one source to `ndst` destinations (a push stores one buffer into every peer). 16-byte chunk
// c is always handled by thread c mod (grid size), whatever the alignment, so a copy and a later read of the same
// bytes by a peer run in the same CTA index and the per-CTA barrier orders them (the Broadcast root stages its data
// this way). A thread keeps kCopyUnroll chunks (c, c + grid, ...) in flight: one 16-byte load at a time cannot
// cover NVLink's latency. The last group is predicated rather than left to a chunk-at-a-time loop, which would
// move a copy of under kCopyUnroll x grid chunks (2 MiB with 32 CTAs) one chunk per round trip. Each chunk is
// loaded once, whatever `ndst`.
constexpr int kCopyUnroll = 8;
template <bool Last>
__device__ inline void copyGroup(void* const* dst, int ndst, const void* src, size_t c, size_t nth, size_t full) {
  uint4 v[kCopyUnroll];
#pragma unroll
  for (int u = 0; u < kCopyUnroll; ++u)
    if (!Last || c + u * nth < full) v[u] = ((const uint4*)src)[c + u * nth];
  for (int i = 0; i < ndst; ++i) {
    if (dst[i] == src) continue;
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u)
      if (!Last || c + u * nth < full) ((uint4*)dst[i])[c + u * nth] = v[u];
  }
}
__device__ inline void copyBytesTo(void* const* dst, int ndst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nth = (size_t)gridDim.x * blockDim.x;
  bool vec = ((uintptr_t)src & 15) == 0;
  for (int i = 0; i < ndst; ++i) vec = vec && ((uintptr_t)dst[i] & 15) == 0;
  size_t chunks = (bytes + 15) / 16, full = vec ? bytes / 16 : 0;
  size_t c = tid;
  for (; c + (kCopyUnroll - 1) * nth < full; c += kCopyUnroll * nth) copyGroup<false>(dst, ndst, src, c, nth, full);
  if (c < full) copyGroup<true>(dst, ndst, src, c, nth, full);
  for (c = firstOwnedFrom(full, tid, nth); c < chunks; c += nth) {   // the bytes past the last whole vector
    size_t off = c * 16, end = off + 16 < bytes ? off + 16 : bytes;
    for (int i = 0; i < ndst; ++i)
      if (dst[i] != src)
        for (size_t b = off; b < end; ++b) ((char*)dst[i])[b] = ((const char*)src)[b];
  }
}
__device__ inline void copyBytes(void* dst, const void* src, size_t bytes) {
  void* dsts[1] = {dst};
  copyBytesTo(dsts, 1, src, bytes);
}

}  // namespace cucofp
