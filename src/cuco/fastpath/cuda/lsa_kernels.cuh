// cuco fast path: LSA device kernels, one per collective, issued by CTAs (issuer=cta; the copy-engine path of
// the movement collectives is lsa_copy.cuh).
//
// Protocol of the collective kernels: each rank publishes a descriptor (window id, offset, bytes, sequence
// number) of the memory its peers must read into each peer's symmetric mailbox, all CTAs meet at an LSA
// barrier, each rank pulls from its peers through ncclGetLsaPointer, and a final barrier keeps every rank
// from overwriting its buffers while a peer may still read them. Descriptors make the kernels correct for
// any buffer layout (in-place calls, offsets that differ per rank, AlltoAllv displacements).
// Sends and receives are pairwise, as in NCCL: no barrier, so ranks may issue them under rank-dependent
// conditions (pipelines); see p2pKernel. The movement collectives (AllGather, AlltoAll, Broadcast) take their
// entry and exit ordering as a policy: WorldSync (barriers, below) or SignalSync (per-peer flags, lsa_signal.cuh).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <nccl.h>
#include <nccl_device.h>
#include "lsa_layout.cuh"
#include "lsa_copy_bytes.cuh"

namespace cucofp {

// The CTAs the mailbox's per-CTA words (acknowledgements, signal and push flags) and the LSA barriers are laid out
// for, kCtas >= the CTAs a communication kernel launches (kCommCtas, lsa_point.cuh): 32, or the point's
// CUCOFP_COMM_CTAS where it asks for more, so every point of 32 CTAs or fewer keeps one layout.
#if defined(CUCOFP_COMM_CTAS) && CUCOFP_COMM_CTAS > 32
constexpr int kCtas = CUCOFP_COMM_CTAS;
#else
constexpr int kCtas = 32;
#endif
constexpr int kThreads = 512;
constexpr int kMaxWindows = 64;    // windows one communicator can address (mailbox included)
constexpr int kMaxSlots = 16;      // descriptors one sender may post to one receiver per kernel
constexpr int kMaxP2p = 64;        // send/recv operations merged into one kernel

struct Desc {                      // 32 bytes, written by the sender into the receiver's mailbox
  unsigned long long offset, bytes;
  unsigned int win, seq;
  unsigned long long pad;
};
struct Ref { unsigned int win; unsigned long long offset; };   // memory as (window id, offset)
struct Windows { ncclWindow_t w[kMaxWindows]; };

// Mailbox layout (symmetric, per rank): collective descriptors [sender][slot], p2p descriptors
// [sender][slot], p2p acknowledgements [receiver][slot][cta], signal flags, then the push reductions' flags and,
// 256-byte aligned, their staged buffers (lsa_layout.cuh).
__host__ __device__ inline size_t descBytes(int nranks) { return (size_t)nranks * kMaxSlots * sizeof(Desc); }
__host__ __device__ inline size_t ackBytes(int nranks) { return (size_t)nranks * kMaxSlots * kCtas * sizeof(unsigned int); }
__host__ __device__ inline size_t flagsOffset(int nranks) { return 2 * descBytes(nranks) + ackBytes(nranks); }
__host__ __device__ inline size_t pushFlagsStart(int nranks) {
  return flagsOffset(nranks) + signalFlagBytes(nranks, kCtas);
}
__host__ __device__ inline size_t pushStagingStart(int nranks) {
  return (pushFlagsStart(nranks) + pushFlagBytes(nranks, kCtas) + 255) & ~(size_t)255;
}
__host__ __device__ inline size_t mailboxBytes(int nranks) {
  return pushStagingStart(nranks) + pushStagingBytes(nranks);
}

struct Launch {                    // what every kernel gets
  ncclDevComm dc;
  Windows wins;
  Ref mailbox;
  unsigned int seq;                // same on every rank for the same operation
};

enum Kind { kAllGather = 0, kAlltoAll, kReduceScatter, kAllReduce, kBroadcast, kReduce, kP2p };
enum Op { kSum = 0, kProd, kMax, kMin, kAvg };

struct Coll {
  Ref send;                        // what peers read (window + offset), or the recv buffer for Broadcast
  Ref recvRef;                     // AllReduce: the recv buffer, read by peers in the gather phase
  const void* sendLocal;
  void* recv;
  unsigned long long count;        // elements (per rank for AllGather/AlltoAll/ReduceScatter)
  int elemBytes, op, root;
  int push;                        // a pushed AllReduce or ReduceScatter (lsa_push.cuh): 1 + its staging slot; else 0
};

struct P2pOp { int peer, slot, isSend; unsigned int seq; unsigned long long bytes; Ref ref; void* recv; };
struct P2p { int n; P2pOp ops[kMaxP2p]; };

// ---- building blocks ------------------------------------------------------------------------------
__device__ inline void* lsaPtr(const Launch& L, Ref r, int peer) {
  return ncclGetLsaPointer(L.wins.w[r.win], (size_t)r.offset, peer);
}

// One barrier session per kernel (CTA i meets CTA i of every peer), opened at the kernel's start.
#define CUCOFP_SESSION(L) \
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), (L).dc, ncclTeamLsa((L).dc), (L).dc.lsaBarrier, blockIdx.x)
#define CUCOFP_BARRIER() bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel)

// sync_scope=world for the movement collectives: enter() and leave() are LSA barriers of the whole team
// (`sources` and `readers` are what SignalSync waits for; a barrier waits for everyone).
struct WorldSync {
  ncclLsaBarrierSession<ncclCoopCta> bar;
  __device__ WorldSync(const Launch& L, unsigned long long /*sources*/, unsigned long long /*readers*/)
      : bar(ncclCoopCta(), L.dc, ncclTeamLsa(L.dc), L.dc.lsaBarrier, blockIdx.x) {}
  __device__ void enter() { CUCOFP_BARRIER(); }
  __device__ void leave() { CUCOFP_BARRIER(); }
};

// Post `what` into `peer`'s mailbox at [my rank][slot]. Every CTA writes the same value, so each CTA's
// own barrier arrival orders the write before any peer CTA that passes the matching barrier reads it.
__device__ inline void publish(const Launch& L, int peer, int slot, Ref what, unsigned long long bytes) {
  if (threadIdx.x == 0) {
    Ref box = L.mailbox;
    box.offset += ((size_t)L.dc.lsaRank * kMaxSlots + slot) * sizeof(Desc);
    volatile Desc* d = (volatile Desc*)lsaPtr(L, box, peer);
    d->offset = what.offset; d->bytes = bytes; d->win = what.win; d->seq = L.seq;
    __threadfence_system();
  }
}

// Read the descriptor `sender` posted to me at `slot`; traps on a sequence mismatch (ranks disagree on
// the order of operations), which would otherwise read stale memory silently.
__device__ inline Desc received(const Launch& L, int sender, int slot) {
  Ref box = L.mailbox;
  box.offset += ((size_t)sender * kMaxSlots + slot) * sizeof(Desc);
  volatile Desc* v = (volatile Desc*)lsaPtr(L, box, L.dc.lsaRank);
  Desc d; d.offset = v->offset; d.bytes = v->bytes; d.win = v->win; d.seq = v->seq;
  if (d.seq != L.seq || d.win >= (unsigned)kMaxWindows) {
    if (threadIdx.x == 0)
      printf("cuco fast path: rank %d expected operation %u from rank %d, found %u: ranks issue different "
             "operation sequences\n", L.dc.lsaRank, L.seq, sender, d.seq);
    __trap();
  }
  return d;
}

__device__ inline void* peerPtr(const Launch& L, const Desc& d, int peer, size_t extra) {
  return ncclGetLsaPointer(L.wins.w[d.win], (size_t)d.offset + extra, peer);
}

template <class T> struct Acc { typedef T type; };
template <> struct Acc<float> { typedef float type; };
template <> struct Acc<__half> { typedef float type; };
template <> struct Acc<__nv_bfloat16> { typedef float type; };
template <class T> __device__ inline typename Acc<T>::type load(const T* p) { return (typename Acc<T>::type)(*p); }
template <> __device__ inline float load<__half>(const __half* p) { return __half2float(*p); }
template <> __device__ inline float load<__nv_bfloat16>(const __nv_bfloat16* p) { return __bfloat162float(*p); }
template <class T, class A> __device__ inline T store(A v) { return (T)v; }
template <> __device__ inline __half store<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 store<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }

template <class A> __device__ inline A combine(int op, A a, A b) {
  switch (op) {
    case kProd: return a * b;
    case kMax: return a > b ? a : b;
    case kMin: return a < b ? a : b;
    default: return a + b;   // kSum, kAvg (divided at the end)
  }
}

// Ownership of a range's elements: 16-byte chunk c (elements [c*V, c*V + V) of the range, V = 16 / sizeof(T))
// belongs to thread c mod (grid size), whatever the alignment (a chunk whose pointers are not 16-byte aligned goes
// element by element), so a kernel's phases and the per-CTA barrier between them agree on who wrote what.
template <class T> struct Chunk { static constexpr size_t V = sizeof(T) >= 16 ? 1 : 16 / sizeof(T); };
// The floating-point types move as vectors; the integer types keep the scalar loop (the same ownership), which
// keeps the rewrite's compile time down: every program compiles the reductions for every type.
template <class T> struct Vectorised { static constexpr bool value = false; };
template <> struct Vectorised<float> { static constexpr bool value = true; };
template <> struct Vectorised<__half> { static constexpr bool value = true; };
template <> struct Vectorised<__nv_bfloat16> { static constexpr bool value = true; };

__device__ inline bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// out[o][k] = op over the nr ranks p of src[p][k] for k in [0, n), for each of the nout outputs (the two-shot
// AllReduce stores its sums into every rank's recv at once); aligned chunks (`vec`) move as 16-byte vectors,
// kReduceUnroll per thread. Compiled once per type (not inlined into each kernel: compile time), and called with
// pointers and scalars only: a struct passed by reference to a function that is not inlined is copied to every
// thread's stack, which costs microseconds per call.
constexpr int kReduceUnroll = 4;
template <class T>
__device__ __noinline__ void reduceChunks(const T* const* src, int nr, bool vec, T* const* out, int nout, size_t n,
                                          int op) {
  typedef typename Acc<T>::type A;
  constexpr size_t V = Chunk<T>::V;
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nth = (size_t)gridDim.x * blockDim.x;
  size_t chunks = (n + V - 1) / V;
  size_t c = tid;
  if constexpr (Vectorised<T>::value) {
    // kReduceUnroll chunks per thread and two peers' loads in flight at once (the same chunk ownership)
    typedef union { uint4 u; T t[V]; } Vec;
    size_t full = vec ? n / V : 0;
    for (; c + (kReduceUnroll - 1) * nth < full; c += kReduceUnroll * nth) {
      A acc[kReduceUnroll][V];
      for (int p = 0; p < nr; p += 2) {
        Vec a[kReduceUnroll], b[kReduceUnroll];
        bool two = p + 1 < nr;
#pragma unroll
        for (int u = 0; u < kReduceUnroll; ++u) a[u].u = *(const uint4*)(src[p] + (c + u * nth) * V);
        if (two) {
#pragma unroll
          for (int u = 0; u < kReduceUnroll; ++u) b[u].u = *(const uint4*)(src[p + 1] + (c + u * nth) * V);
        }
#pragma unroll
        for (int u = 0; u < kReduceUnroll; ++u) {
#pragma unroll
          for (size_t v = 0; v < V; ++v) {
            A x = load<T>(&a[u].t[v]);
            acc[u][v] = p == 0 ? x : combine<A>(op, acc[u][v], x);
            if (two) acc[u][v] = combine<A>(op, acc[u][v], load<T>(&b[u].t[v]));
          }
        }
      }
      Vec res[kReduceUnroll];
#pragma unroll
      for (int u = 0; u < kReduceUnroll; ++u) {
#pragma unroll
        for (size_t v = 0; v < V; ++v) res[u].t[v] = store<T, A>(op == kAvg ? acc[u][v] / (A)nr : acc[u][v]);
      }
      for (int o = 0; o < nout; ++o) {
#pragma unroll
        for (int u = 0; u < kReduceUnroll; ++u) *(uint4*)(out[o] + (c + u * nth) * V) = res[u].u;
      }
    }
  }
  for (; c < chunks; c += nth) {
    size_t k0 = c * V, k1 = k0 + V < n ? k0 + V : n;
    if constexpr (Vectorised<T>::value) {
      if (vec && k1 - k0 == V) {
        union { uint4 u; T t[V]; } in, res;
        A acc[V];
        in.u = *(const uint4*)(src[0] + k0);
        for (size_t v = 0; v < V; ++v) acc[v] = load<T>(&in.t[v]);
        for (int p = 1; p < nr; ++p) {
          in.u = *(const uint4*)(src[p] + k0);
          for (size_t v = 0; v < V; ++v) acc[v] = combine<A>(op, acc[v], load<T>(&in.t[v]));
        }
        for (size_t v = 0; v < V; ++v) res.t[v] = store<T, A>(op == kAvg ? acc[v] / (A)nr : acc[v]);
        for (int o = 0; o < nout; ++o) *(uint4*)(out[o] + k0) = res.u;
        continue;
      }
    }
    {
      for (size_t k = k0; k < k1; ++k) {
        A acc = load<T>(src[0] + k);
        for (int p = 1; p < nr; ++p) acc = combine<A>(op, acc, load<T>(src[p] + k));
        if (op == kAvg) acc = acc / (A)nr;
        for (int o = 0; o < nout; ++o) out[o][k] = store<T, A>(acc);
      }
    }
  }
}

// reduceChunks over each rank's published buffer at `byteOff` (peer addresses resolved once per call), taken from
// rank `first` on and round: a range that only this rank reduces starts at the next rank (staggered, so no rank's
// buffer is read by every rank at once); one that every rank reduces alike (the one-shot AllReduce) starts at rank
// 0 everywhere, so every rank sums in the same order and holds the same bits.
template <class T>
__device__ inline void reduceRange(const Launch& L, const Desc* d, size_t byteOff, T* const* out, int nout, size_t n,
                                   int op, int first) {
  const T* src[64];
  int nr = L.dc.lsaSize;
  bool vec = Vectorised<T>::value;
  for (int o = 0; o < nout; ++o) vec = vec && aligned16(out[o]);
  for (int i = 0; i < nr; ++i) {
    int p = (first + i) % nr;
    src[i] = (const T*)peerPtr(L, d[p], p, byteOff);
    vec = vec && aligned16(src[i]);
  }
  reduceChunks<T>(src, nr, vec, out, nout, n, op);
}
template <class T>
__device__ inline void reduceRange(const Launch& L, const Desc* d, size_t byteOff, T* out, size_t n, int op,
                                   int first) {
  T* outs[1] = {out};
  reduceRange<T>(L, d, byteOff, outs, 1, n, op, first);
}

// ---- kernels ----------------------------------------------------------------------------------------
// recv[p*count + i] = send_p[i]
template <class Sync>
__global__ void __launch_bounds__(kThreads) allgatherKernel(Launch L, Coll c) {
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  Sync sync(L, sourcesOf(false, nr, me, 0), readersOf(false, nr, me, 0));
  size_t bytes = c.count * c.elemBytes;
  for (int p = 0; p < nr; ++p) publish(L, p, 0, c.send, bytes);
  sync.enter();
  for (int i = 0; i < nr; ++i) {
    int p = staggered(i, me, nr);
    Desc d = received(L, p, 0);
    const void* src = p == me ? c.sendLocal : peerPtr(L, d, p, 0);
    copyBytes((char*)c.recv + (size_t)p * bytes, src, bytes);
  }
  sync.leave();
}

// recv[p*count + i] = send_p[me*count + i]
template <class Sync>
__global__ void __launch_bounds__(kThreads) alltoallKernel(Launch L, Coll c) {
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  Sync sync(L, sourcesOf(false, nr, me, 0), readersOf(false, nr, me, 0));
  size_t bytes = c.count * c.elemBytes;
  for (int p = 0; p < nr; ++p) publish(L, p, 0, c.send, bytes * nr);
  sync.enter();
  for (int i = 0; i < nr; ++i) {
    int p = staggered(i, me, nr);
    Desc d = received(L, p, 0);
    const void* src = p == me ? (const char*)c.sendLocal + (size_t)me * bytes : peerPtr(L, d, p, (size_t)me * bytes);
    copyBytes((char*)c.recv + (size_t)p * bytes, src, bytes);
  }
  sync.leave();
}

// recv[i] = op_p send_p[me*count + i]
template <class T>
__global__ void __launch_bounds__(kThreads) reducescatterKernel(Launch L, Coll c) {
  CUCOFP_SESSION(L);
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  for (int p = 0; p < nr; ++p) publish(L, p, 0, c.send, c.count * nr * sizeof(T));
  CUCOFP_BARRIER();
  Desc d[64];
  for (int p = 0; p < nr; ++p) d[p] = received(L, p, 0);
  reduceRange<T>(L, d, (size_t)me * c.count * sizeof(T), (T*)c.recv, c.count, c.op, staggered(1, me, nr));
  CUCOFP_BARRIER();
}

// The two-shot AllReduce: rank r reduces slice r over every rank's send; each rank takes in 2(W-1)/W of a buffer.
// stores (one pass): the sums go into every rank's recv at once (its own and its peers', through their windows),
// between the entry and exit barriers: no round trip per load, no barrier between the phases. Otherwise (gather):
// the sums go into the rank's own recv, a barrier, then each rank loads the other slices from their owners' recv.
// Measured on 4x H100 (benchmarks/results/reductions/): stores win at W = 2 and below 32 MiB at W = 4, gathers
// from 64 MiB up at W = 4 (1 GiB: 5.07 against 5.82 ms). Safe in place: in each phase a rank writes only elements
// no peer reads in that phase (slice r of every buffer is read and written by rank r alone in the first; in the
// gather, rank r reads slice p of p's recv and writes slice p of its own). The gather's chunks are phase 1's:
// copyBytes and reduceChunks give chunk c to thread c mod the grid's threads, so each CTA's per-CTA barrier covers
// the chunks it reads.
template <class T>
__global__ void __launch_bounds__(kThreads) allreduceKernel(Launch L, Coll c, bool stores) {
  CUCOFP_SESSION(L);
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  for (int p = 0; p < nr; ++p) { publish(L, p, 0, c.send, c.count * sizeof(T)); publish(L, p, 1, c.recvRef, c.count * sizeof(T)); }
  CUCOFP_BARRIER();
  Desc d[64];
  T* outs[64];
  size_t lo = reduceSliceBegin(c.count, Chunk<T>::V, nr, me);
  size_t hi = reduceSliceBegin(c.count, Chunk<T>::V, nr, me + 1);
  for (int p = 0; p < nr; ++p) d[p] = received(L, p, 0);
  int nout = stores ? nr : 1;
  for (int i = 0; i < nout; ++i) {  // own recv first, then the peers from the next rank on
    int p = staggered(i, me, nr);
    outs[i] = p == me ? (T*)c.recv + lo : (T*)peerPtr(L, received(L, p, 1), p, lo * sizeof(T));
  }
  reduceRange<T>(L, d, lo * sizeof(T), outs, nout, hi - lo, c.op, staggered(1, me, nr));
  if (!stores) {
    CUCOFP_BARRIER();
    for (int i = 1; i < nr; ++i) {
      int p = staggered(i, me, nr);
      size_t plo = reduceSliceBegin(c.count, Chunk<T>::V, nr, p);
      size_t phi = reduceSliceBegin(c.count, Chunk<T>::V, nr, p + 1);
      copyBytes((T*)c.recv + plo, peerPtr(L, received(L, p, 1), p, plo * sizeof(T)), (phi - plo) * sizeof(T));
    }
  }
  CUCOFP_BARRIER();
}

// The root copies send into its own recv, then every rank pulls the root's recv.
template <class Sync>
__global__ void __launch_bounds__(kThreads) broadcastKernel(Launch L, Coll c) {
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  Sync sync(L, sourcesOf(true, nr, me, c.root), readersOf(true, nr, me, c.root));
  size_t bytes = c.count * c.elemBytes;
  if (me == c.root) {
    for (int p = 0; p < nr; ++p) publish(L, p, 0, c.send, bytes);
    copyBytes(c.recv, c.sendLocal, bytes);
  }
  sync.enter();
  if (me != c.root) copyBytes(c.recv, peerPtr(L, received(L, c.root, 0), c.root, 0), bytes);
  sync.leave();
}

// recv[i] = op_p send_p[i] on every rank: the one-shot AllReduce, out of place (two barriers, no gather pass; W - 1
// buffers read per rank, so the launch picks it as the point's allreduce directive says, launchReduce).
template <class T>
__global__ void __launch_bounds__(kThreads) reduceKernel(Launch L, Coll c) {
  CUCOFP_SESSION(L);
  int nr = L.dc.lsaSize;
  for (int p = 0; p < nr; ++p) publish(L, p, 0, c.send, c.count * sizeof(T));
  CUCOFP_BARRIER();
  Desc d[64];
  for (int p = 0; p < nr; ++p) d[p] = received(L, p, 0);
  reduceRange<T>(L, d, 0, (T*)c.recv, c.count, c.op, 0);
  CUCOFP_BARRIER();
}

// recv[i] = op_p send_p[i] on the root only. The ranks that own a slice (reduceSliceOf: from three ranks on, every
// rank but the root) reduce it over every rank's send buffer and store it straight into the root's recv through the
// root's window, so one buffer enters the root and the root's SMs stay free (at W = 4 slices over all four ranks
// brought 1.5 buffers into the root and ran at 217 GB/s of bus bandwidth against NCCL's 364; the root reading all
// buffers, 109 GB/s). Slices start on 16-byte chunks, so every slice moves as vectors. In place (the root's send is
// its recv): a slice of the root's buffer is read and written by its owner alone, each chunk loaded before stored.
template <class T>
__global__ void __launch_bounds__(kThreads) reduceRootKernel(Launch L, Coll c) {
  CUCOFP_SESSION(L);
  int nr = L.dc.lsaSize, me = L.dc.lsaRank;
  for (int p = 0; p < nr; ++p) publish(L, p, 0, c.send, c.count * sizeof(T));
  if (me == c.root) for (int p = 0; p < nr; ++p) publish(L, p, 1, c.recvRef, c.count * sizeof(T));
  CUCOFP_BARRIER();
  int k = reduceSliceOf(nr, me, c.root), parts = reduceSliceParts(nr);
  if (k >= 0) {
    Desc d[64];
    for (int p = 0; p < nr; ++p) d[p] = received(L, p, 0);
    size_t lo = reduceSliceBegin(c.count, Chunk<T>::V, parts, k);
    size_t hi = reduceSliceBegin(c.count, Chunk<T>::V, parts, k + 1);
    T* out = me == c.root ? (T*)c.recv + lo : (T*)peerPtr(L, received(L, c.root, 1), c.root, lo * sizeof(T));
    reduceRange<T>(L, d, lo * sizeof(T), out, hi - lo, c.op, staggered(1, me, nr));
  }
  CUCOFP_BARRIER();
}

// ---- point-to-point: pairwise, no barrier -----------------------------------------------------------
// The k-th send from rank s to rank r carries sequence number k (counted by the host per pair and
// direction) and matches r's k-th receive from s, as in NCCL. The sender posts a descriptor into the
// receiver's mailbox (slot k mod kMaxSlots); every receiving CTA waits for it, copies its share (the same
// element->CTA map on both sides) and acknowledges into the sender's mailbox; each sending CTA waits for
// the acknowledgement of the receiving CTA with its index, so a sender's buffer is reusable once its
// kernel has finished. Only the two ranks of a pair synchronise: ranks may issue different sequences of
// sends and receives (pipelines, `if (rank == 0) send else recv`).
constexpr long long kSpinLimit = 1ll << 36;   // about a minute of polling: a missing peer traps, not hangs

__device__ inline volatile Desc* p2pBox(const Launch& L, int owner, int sender, int slot) {
  Ref box = L.mailbox;
  box.offset += descBytes(L.dc.lsaSize) + ((size_t)sender * kMaxSlots + slot) * sizeof(Desc);
  return (volatile Desc*)lsaPtr(L, box, owner);
}

__device__ inline volatile unsigned int* ackBox(const Launch& L, int owner, int receiver, int slot) {
  Ref box = L.mailbox;
  box.offset += 2 * descBytes(L.dc.lsaSize) + (((size_t)receiver * kMaxSlots + slot) * kCtas + blockIdx.x) * sizeof(unsigned int);
  return (volatile unsigned int*)lsaPtr(L, box, owner);
}

// `orLater`: a later sequence number also ends the wait (signal flags keep the last collective's number).
__device__ inline void spinUntil(volatile unsigned int* word, unsigned int value, const char* what, int me, int peer,
                                 bool orLater = false) {
  long long spins = 0;
  while (orLater ? !seqReached(*word, value) : *word != value) {
    if (++spins > kSpinLimit) {
      printf("cuco fast path: rank %d waited too long for %s %u of rank %d; the ranks' sends, receives or "
             "collectives do not match\n", me, what, value, peer);
      __trap();
    }
    __nanosleep(64);
  }
  __threadfence_system();
}

__global__ void __launch_bounds__(kThreads) p2pKernel(Launch L, P2p g) {
  int me = L.dc.lsaRank;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (int i = 0; i < g.n; ++i) {
      const P2pOp& o = g.ops[i];
      if (!o.isSend) continue;
      volatile Desc* d = p2pBox(L, o.peer, me, o.slot);
      d->offset = o.ref.offset; d->bytes = o.bytes; d->win = o.ref.win;
      __threadfence_system();
      d->seq = o.seq;
    }
    __threadfence_system();
  }
  for (int i = 0; i < g.n; ++i) {
    const P2pOp& o = g.ops[i];
    if (o.isSend) continue;
    volatile Desc* v = p2pBox(L, me, o.peer, o.slot);
    if (threadIdx.x == 0) spinUntil(&v->seq, o.seq, "message", me, o.peer);
    __syncthreads();
    Desc d; d.offset = v->offset; d.bytes = v->bytes; d.win = v->win;
    unsigned long long n = d.bytes < o.bytes ? d.bytes : o.bytes;
    copyBytes(o.recv, peerPtr(L, d, o.peer, 0), n);
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence_system(); *ackBox(L, o.peer, me, o.slot) = o.seq; }
  }
  for (int i = 0; i < g.n; ++i) {
    const P2pOp& o = g.ops[i];
    if (o.isSend && threadIdx.x == 0) spinUntil(ackBox(L, me, o.peer, o.slot), o.seq, "acknowledgement", me, o.peer);
  }
  __syncthreads();
}

}  // namespace cucofp
