// cuco fast path: the device side of sync_scope=signal and of issuer=copy_engine for the movement collectives
// (AllGather, AlltoAll, Broadcast). Reductions and sends/receives keep their own ordering (lsa_kernels.cuh).
#pragma once
#include "lsa_kernels.cuh"

namespace cucofp {

// sync_scope=signal: no barrier. enter() posts "my buffers for collective L.seq are ready" to every reader and
// waits for that word from every source; leave() posts "done reading L.seq" to every source and waits for that
// word from every reader, so no rank overwrites a buffer a peer still reads. Sequence numbers (the same on
// every rank) keep repeated calls apart. CTA c signals CTA c of its peers, as at a barrier: the element->CTA
// map is the same on both sides (the Broadcast root's staging).
struct SignalSync {
  const Launch* L;
  unsigned long long sources, readers;
  __device__ SignalSync(const Launch& launch, unsigned long long src, unsigned long long rd)
      : L(&launch), sources(src), readers(rd) {}
  __device__ volatile unsigned int* flag(int owner, size_t offset) const {
    Ref box = L->mailbox;
    box.offset += flagsOffset(L->dc.lsaSize) + offset;
    return (volatile unsigned int*)lsaPtr(*L, box, owner);
  }
  // Post to the ranks of `to` at my slot, then wait for the ranks of `from` at theirs (flags `done` or ready).
  __device__ void exchange(unsigned long long to, unsigned long long from, bool done, const char* what) const {
    int nr = L->dc.lsaSize, me = L->dc.lsaRank, cta = blockIdx.x;
    __syncthreads();   // every thread's writes (staging) or reads (pulls) of this CTA are done
    if (threadIdx.x == 0) {
      __threadfence_system();
      for (int p = 0; p < nr; ++p)
        if (to >> p & 1) *flag(p, done ? doneFlagOffset(nr, kCtas, me, cta) : readyFlagOffset(nr, kCtas, me, cta)) = L->seq;
      for (int p = 0; p < nr; ++p)
        if (from >> p & 1)
          spinUntil(flag(me, done ? doneFlagOffset(nr, kCtas, p, cta) : readyFlagOffset(nr, kCtas, p, cta)), L->seq,
                    what, me, p, true);
    }
    __syncthreads();
  }
  __device__ void enter() const { exchange(readers, sources, false, "the ready signal of collective"); }
  __device__ void leave() const { exchange(sources, readers, true, "the done signal of collective"); }
};

// ---- issuer=copy_engine ---------------------------------------------------------------------------------
// The copy engines move the bytes (lsa_copy.cuh: host-issued copies between LSA-mapped buffers); these kernels
// of one CTA give them the ordering the CTA kernels have. copyEntryKernel publishes this rank's buffer as the
// CTA kernels do, enters, and checks that every source's buffer is where the host addressed it: the host
// derives a peer's address from its own window and offset (`expect`: source p's buffer at
// expect.offset + p * stride), which holds when every rank passes the same allocations at the same offsets.
struct CopyExpect { Ref at; long long stride; };

template <class Sync>
__global__ void copyEntryKernel(Launch L, Ref mine, unsigned long long bytes, CopyExpect expect, bool rooted, int root) {
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  unsigned long long sources = sourcesOf(rooted, nr, me, root), readers = readersOf(rooted, nr, me, root);
  Sync sync(L, sources, readers);
  for (int p = 0; p < nr; ++p)
    if (readers >> p & 1) publish(L, p, 0, mine, bytes);
  sync.enter();
  for (int p = 0; p < nr && threadIdx.x == 0; ++p) {   // no early return: the barrier session ends CTA-wide
    if (!(sources >> p & 1)) continue;
    Desc d = received(L, p, 0);
    unsigned long long want = (unsigned long long)((long long)expect.at.offset + (long long)p * expect.stride);
    if (d.win != expect.at.win || d.offset != want) {
      printf("cuco fast path: rank %d's buffer is at window %u offset %llu, rank %d expected window %u offset %llu: "
             "issuer=copy_engine needs every rank to pass the same allocations at the same offsets (use issuer=cta)\n",
             p, d.win, d.offset, me, expect.at.win, want);
      __trap();
    }
  }
}

template <class Sync>
__global__ void copyExitKernel(Launch L, bool rooted, int root) {
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  Sync sync(L, sourcesOf(rooted, nr, me, root), readersOf(rooted, nr, me, root));
  sync.leave();
}

// Each rank's base address of window `win` as this rank maps it (the host resolves them once per window).
__global__ void peerBasesKernel(ncclWindow_t win, int nranks, char** out) {
  int p = threadIdx.x;
  if (p < nranks) out[p] = (char*)ncclGetLsaPointer(win, 0, p);
}

}  // namespace cucofp
