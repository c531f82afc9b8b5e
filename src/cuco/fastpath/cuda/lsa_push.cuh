// cuco fast path: allreduce=push and reducescatter=push, reductions of small buffers with one one-way signal and
// no barrier.
//
// Each rank stores its send buffer (AllReduce), or slice p of it (ReduceScatter), into staging slot [s][me] of
// every peer p's mailbox (lsa_layout.cuh), and each CTA then raises flag [s][me][cta] there to the collective's
// sequence number; a rank reduces its own buffer (or slice) and the W - 1 staged ones from its local memory once
// CTA cta's flags from every peer are up. Chunk ownership is the same on both sides (16-byte chunk c of a copy by
// thread c mod grid, copyBytes and reduceChunks), so CTA cta of the receiver reads exactly what CTA cta of each
// sender stored before raising its flag. Every rank sums in rank order (an AllReduce leaves the same bits on every
// rank, as the one-shot kernel does).
//
// Why no barrier guards a slot's reuse: consecutive push reductions of a communicator alternate slots (CommState
// counts them alike on every rank), and a rank's push k + 2 (slot s again) starts after its push k + 1 ended,
// which waited for every peer's flag of push k + 1 (every push involves every peer), which each peer raised after
// its push k ended (kernels of one communicator run in issue order): no peer still reads slot s of push k. The
// flag of push k is not overwritten before it is read for the same reason.
#pragma once
#include "lsa_signal.cuh"

namespace cucofp {

// `offset` bytes into `peer`'s mailbox, as this rank maps it.
__device__ inline void* mailboxAt(const Launch& L, size_t offset, int peer) {
  Ref r = L.mailbox;
  r.offset += offset;
  return lsaPtr(L, r, peer);
}
__device__ inline volatile unsigned int* pushFlag(const Launch& L, int slot, int sender, int owner) {
  int nr = L.dc.lsaSize;
  return (volatile unsigned int*)mailboxAt(L, pushFlagsStart(nr) + pushFlagOffset(nr, kCtas, slot, sender, blockIdx.x),
                                           owner);
}
__device__ inline void* pushStaged(const Launch& L, int slot, int sender, int owner) {
  int nr = L.dc.lsaSize;
  return mailboxAt(L, pushStagingStart(nr) + pushStagingOffset(nr, slot, sender), owner);
}

// recv[i] = op_p send_p[i] (AllReduce, `scatter` false) or op_p send_p[me*count + i] (ReduceScatter), i < count.
template <class T>
__global__ void __launch_bounds__(kThreads) pushReduceKernel(Launch L, Coll c, bool scatter) {
  int nr = L.dc.lsaSize, me = L.dc.lsaRank, slot = c.push - 1;
  size_t bytes = c.count * sizeof(T);
  const char* send = (const char*)c.sendLocal;
  if (scatter) {
    for (int i = 1; i < nr; ++i) {   // the next rank first: no peer's inbound links take every rank's stores at once
      int p = staggered(i, me, nr);
      copyBytes(pushStaged(L, slot, me, p), send + (size_t)p * bytes, bytes);
    }
  } else {   // one buffer to every peer: each chunk loaded once and stored W - 1 times, the next rank first
    void* dst[64];
    for (int i = 1; i < nr; ++i) dst[i - 1] = pushStaged(L, slot, me, staggered(i, me, nr));
    copyBytesTo(dst, nr - 1, send, bytes);
  }
  __syncthreads();   // every thread's stores of this CTA are issued
  if (threadIdx.x == 0) {
    __threadfence_system();
    for (int i = 1; i < nr; ++i) *pushFlag(L, slot, me, staggered(i, me, nr)) = L.seq;
    for (int i = 1; i < nr; ++i) {
      int p = staggered(i, me, nr);
      spinUntil(pushFlag(L, slot, p, me), L.seq, "the pushed buffer of collective", me, p);
    }
  }
  __syncthreads();
  const T* src[64];
  bool vec = Vectorised<T>::value && aligned16(c.recv);
  for (int p = 0; p < nr; ++p) {   // rank order on every rank: every rank holds the same bits
    src[p] = p == me ? (const T*)(send + (scatter ? (size_t)me * bytes : 0)) : (const T*)pushStaged(L, slot, p, me);
    vec = vec && aligned16(src[p]);
  }
  T* out[1] = {(T*)c.recv};
  reduceChunks<T>(src, nr, vec, out, 1, c.count, c.op);
}

}  // namespace cucofp
