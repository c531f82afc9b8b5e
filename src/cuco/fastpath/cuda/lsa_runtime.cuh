// cuco fast path: host side of the LSA collectives. Drop-in replacements of the NCCL host calls with the
// same signatures (cucoAllGather for ncclAllGather, ...). Calls between cucoGroupStart/cucoGroupEnd are
// queued and issued at the group's end, like NCCL groups; the first issue on a communicator creates its
// symmetric mailbox, registers every symmetric allocation (cucoSymAlloc) as a window in allocation order
// (the same on every rank of an SPMD program) and creates the device communicator.
#pragma once
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>
#include "lsa_point.cuh"

#ifndef CUCOFP_PROGRAM_HOOKS   // candidate-ABI form: the harness delays and times communication itself
#define CUCOFP_TRACE(...) ((void)0)
namespace cucofp {
inline void delayComm(cudaStream_t, int) {}
inline void poisonLate(void*, size_t, cudaStream_t) {}
inline cudaError_t newSideStream(cudaStream_t*) { return cudaErrorNotSupported; }   // placement is the harness's
inline cudaError_t freeSideStream(cudaStream_t) { return cudaSuccess; }
}
#endif

namespace cucofp {

#define CUCOFP_FAIL(code, ...) do { fprintf(stderr, "cuco fast path: " __VA_ARGS__); fprintf(stderr, "\n"); return code; } while (0)
#define CUCOFP_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) CUCOFP_FAIL(ncclUnhandledCudaError, "%s failed: %s", #x, cudaGetErrorString(e_)); } while (0)
#define CUCOFP_NCCL(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) CUCOFP_FAIL(r_, "%s failed: %s", #x, ncclGetErrorString(r_)); } while (0)

struct Alloc { void* base; size_t bytes; int device; };
struct Win { void* base; size_t bytes; ncclWindow_t win; bool live; };
struct CommState {
  ncclComm_t comm = nullptr;
  int device = 0, rank = 0, nranks = 0;
  bool owned = true;               // false: devcomm and windows belong to the cuco harness
  bool ready = false;
  ncclDevComm dc;
  void* mailbox = nullptr;         // owned mode only
  size_t mailboxOffset = 0;
  std::vector<Win> wins;           // index = window id; 0 is the mailbox
  std::vector<void*> registered;   // allocation bases already registered (owned mode)
  unsigned long long allocsSeen = ~0ull;   // Registry::generation when its windows were last brought up to date
  unsigned int seq = 0;             // collectives issued (the same on every rank)
  unsigned int pushes = 0;          // reductions issued by push (lsa_push.cuh: their staging slots alternate)
  std::vector<unsigned int> sent, received;   // p2p messages per peer, each direction
  cudaStream_t last = nullptr;
  cudaEvent_t ev = nullptr;
  cudaStream_t side = nullptr;     // stream_overlap: where this communicator's kernels run
  cudaEvent_t done = nullptr;      // recorded on `side` after each kernel
  // issuer=copy_engine (lsa_copy.cuh)
  struct PeerMap { ncclWindow_t win; std::vector<char*> base; };   // base[rank]: the window as this rank maps it
  std::vector<PeerMap> peers;      // index = window id
  char** peerScratch = nullptr;
  cudaStream_t copy[kCopyStreams] = {};
  cudaEvent_t entered = nullptr, copied[kCopyStreams] = {};
};
struct Pending {
  int kind; ncclComm_t comm; cudaStream_t stream;
  const void* send; void* recv; size_t count; ncclDataType_t dt; int op, root, peer;
};
struct Registry {
  std::mutex mu;
  std::vector<Alloc> allocs;
  std::vector<CommState*> comms;
  // Bumped, under `mu`, whenever `allocs` changes: a flush whose communicators have seen the current generation
  // has nothing to register and skips prepare() without the lock (the per-call host path of small collectives).
  std::atomic<unsigned long long> generation{0};
};
inline Registry& registry() { static Registry r; return r; }
inline std::vector<Pending>& pending() { thread_local std::vector<Pending> p; return p; }
inline int& groupDepth() { thread_local int d = 0; return d; }
// issuer=copy_engine (lsa_copy.cuh)
inline ncclResult_t resolvePeers(CommState* s);
inline ncclResult_t launchCopies(CommState* s, const Pending& o, const Coll& c, const Launch& L, cudaStream_t st);
inline ncclResult_t releaseCopies(CommState* s);
// Communicators this thread created (cucoCommInitRank/All), for prepareCreated().
inline std::vector<ncclComm_t>& created() { thread_local std::vector<ncclComm_t> v; return v; }
// stream_overlap: (caller stream, communicator) pairs whose side-stream work the caller has not waited for yet
inline std::vector<std::pair<cudaStream_t, CommState*>>& unjoined() {
  thread_local std::vector<std::pair<cudaStream_t, CommState*>> v;
  return v;
}


inline int dtypeBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1;   // fp8 and newer types: moved as bytes, never reduced here
  }
}

inline CommState* findState(ncclComm_t comm) {
  for (CommState* s : registry().comms) if (s->comm == comm) return s;
  return nullptr;
}

inline ncclResult_t newState(ncclComm_t comm, CommState** out) {
  CommState* s = new CommState();
  s->comm = comm;
  CUCOFP_NCCL(ncclCommCuDevice(comm, &s->device));
  CUCOFP_NCCL(ncclCommUserRank(comm, &s->rank));
  CUCOFP_NCCL(ncclCommCount(comm, &s->nranks));
  if (s->nranks > 64) CUCOFP_FAIL(ncclInvalidUsage, "communicator of %d ranks: the LSA kernels handle at most 64", s->nranks);
  registry().comms.push_back(s);
  *out = s;
  return ncclSuccess;
}

inline ncclResult_t checkLsa(CommState* s) {
  if (s->dc.lsaSize != s->nranks || s->dc.lsaRank != s->rank)
    CUCOFP_FAIL(ncclInvalidUsage, "rank %d: only %d of %d ranks share an NVLink (LSA) domain; the LSA fast path "
                "needs all ranks of the communicator on one node", s->rank, s->dc.lsaSize, s->nranks);
  // CTA i of a communication kernel waits for CTA i of its peers (barriers, flags), so all of its CTAs must run at
  // once: one CTA of kThreads threads fits on every SM, so a grid of up to one CTA per SM does. Checked for points
  // of more than 32 CTAs (32 fit every GPU this path targets; this runs at every candidate launch).
  if (kCommCtas > 32) {
    int sms = 0;
    CUCOFP_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s->device));
    if (kCommCtas > sms)
      CUCOFP_FAIL(ncclInvalidUsage, "rank %d: CUCOFP_COMM_CTAS is %d but GPU %d has %d SMs; the CTAs of a "
                  "communication kernel wait for their peers' and must all run at once", s->rank, kCommCtas,
                  s->device, sms);
  }
  return ncclSuccess;
}

// Owned mode: create mailboxes, register new symmetric allocations, create device communicators. Every
// step is collective, so it runs for all communicators of the flush inside one NCCL group. Runs without
// the registry lock (other threads' ranks must reach the same collective calls); a communicator's state
// is only touched by the thread that issues on it, as NCCL requires.
inline ncclResult_t prepare(std::vector<CommState*>& states) {
  bool current = true;
  for (CommState* s : states)
    current = current && s->owned && s->ready && s->mailbox && s->allocsSeen == registry().generation.load();
  if (current) return ncclSuccess;   // every window registered and every device communicator made already
  int entry = 0;   // the slow path switches devices; the caller's comes back at its end
  CUCOFP_CUDA(cudaGetDevice(&entry));
  std::vector<Alloc> allocs;
  unsigned long long generation = 0;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    allocs = registry().allocs;
    generation = registry().generation.load();
  }
  for (CommState* s : states) {
    if (!s->owned || s->mailbox) continue;
    CUCOFP_CUDA(cudaSetDevice(s->device));
    CUCOFP_NCCL(ncclMemAlloc(&s->mailbox, mailboxBytes(s->nranks)));
    CUCOFP_CUDA(cudaMemset(s->mailbox, 0, mailboxBytes(s->nranks)));
    CUCOFP_CUDA(cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming));
  }
  std::vector<std::pair<CommState*, Alloc>> regs;
  for (CommState* s : states) {
    if (!s->owned) continue;
    if (s->wins.empty()) regs.push_back({s, Alloc{s->mailbox, mailboxBytes(s->nranks), s->device}});
    for (const Alloc& a : allocs)
      if (a.device == s->device && std::find(s->registered.begin(), s->registered.end(), a.base) == s->registered.end())
        regs.push_back({s, a});
  }
  std::vector<ncclWindow_t> handles(regs.size(), nullptr);
  if (!regs.empty()) {
    CUCOFP_NCCL(ncclGroupStart());
    for (size_t i = 0; i < regs.size(); ++i) {
      CUCOFP_CUDA(cudaSetDevice(regs[i].first->device));
      CUCOFP_NCCL(ncclCommWindowRegister(regs[i].first->comm, regs[i].second.base, regs[i].second.bytes, &handles[i],
                                         NCCL_WIN_COLL_SYMMETRIC));
    }
    CUCOFP_NCCL(ncclGroupEnd());
  }
  for (size_t i = 0; i < regs.size(); ++i) {
    CommState* s = regs[i].first;
    if (s->wins.size() >= (size_t)kMaxWindows)
      CUCOFP_FAIL(ncclInvalidUsage, "more than %d symmetric buffers on one communicator", kMaxWindows - 1);
    s->wins.push_back(Win{regs[i].second.base, regs[i].second.bytes, handles[i], true});
    if (regs[i].second.base != s->mailbox) s->registered.push_back(regs[i].second.base);
  }
  bool create = false;
  for (CommState* s : states) create |= s->owned && !s->ready;
  if (create) {
    CUCOFP_NCCL(ncclGroupStart());
    for (CommState* s : states) {
      if (!s->owned || s->ready) continue;
      CUCOFP_CUDA(cudaSetDevice(s->device));
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
      ncclDevCommRequirements req = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
      ncclDevCommRequirements req = {};
#endif
      req.lsaBarrierCount = kCtas;
      CUCOFP_NCCL(ncclDevCommCreate(s->comm, &req, &s->dc));
    }
    CUCOFP_NCCL(ncclGroupEnd());
    for (CommState* s : states) {
      if (!s->owned || s->ready) continue;
      s->ready = true;
      ncclResult_t r = checkLsa(s);
      if (r != ncclSuccess) return r;
    }
  }
  for (CommState* s : states) {   // copy engines address peers from the host: map new windows now, not when timed
    ncclResult_t r = kCopyEngine && s->ready ? resolvePeers(s) : ncclSuccess;
    if (r != ncclSuccess) return r;
  }
  for (CommState* s : states) s->allocsSeen = generation;
  CUCOFP_CUDA(cudaSetDevice(entry));
  return ncclSuccess;
}

inline ncclResult_t resolve(CommState* s, const void* p, const char* what, Ref* out) {
  for (size_t i = 0; i < s->wins.size(); ++i) {
    const Win& w = s->wins[i];
    if (w.live && p >= w.base && (const char*)p < (const char*)w.base + w.bytes) {
      *out = Ref{(unsigned)i, (unsigned long long)((const char*)p - (const char*)w.base)};
      return ncclSuccess;
    }
  }
  CUCOFP_FAIL(ncclInvalidUsage, "rank %d: the %s buffer %p is not symmetric memory; allocate it with ncclMemAlloc "
              "(cucoSymAlloc) so that peers can read it", s->rank, what, p);
}

// `collective`: the launch takes the next collective sequence number (p2p launches are pairwise and
// must not, since ranks may issue different numbers of them).
inline Launch makeLaunch(CommState* s, bool collective) {
  Launch L;
  L.dc = s->dc;
  for (int i = 0; i < kMaxWindows; ++i) L.wins.w[i] = i < (int)s->wins.size() ? s->wins[i].win : nullptr;
  L.mailbox = Ref{0u, (unsigned long long)s->mailboxOffset};
  L.seq = collective ? ++s->seq : 0;
  return L;
}

// Order this launch after the previous one on the same communicator (its barriers and mailbox are shared).
inline ncclResult_t join(CommState* s, cudaStream_t from, cudaStream_t to) {
  if (from == to) return ncclSuccess;
  CUCOFP_CUDA(cudaEventRecord(s->ev, from));
  CUCOFP_CUDA(cudaStreamWaitEvent(to, s->ev, 0));
  return ncclSuccess;
}

// The stream a communication kernel runs on: the caller's (deferred), or the communicator's side stream forked
// from each caller stream in `callers` (stream_overlap).
inline ncclResult_t commStream(CommState* s, const std::vector<cudaStream_t>& callers, cudaStream_t* out) {
  if (CUCOFP_PLACEMENT == 0) { *out = callers[0]; return ncclSuccess; }
  if (!s->side) {
    CUCOFP_CUDA(newSideStream(&s->side));
    CUCOFP_CUDA(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
  }
  for (cudaStream_t c : callers) { ncclResult_t r = join(s, c, s->side); if (r != ncclSuccess) return r; }
  *out = s->side;
  return ncclSuccess;
}

// After a kernel on the side stream: remember that the callers have to wait for it (cucoJoin).
inline ncclResult_t afterComm(CommState* s, const std::vector<cudaStream_t>& callers, cudaStream_t st) {
  s->last = st;
  if (CUCOFP_PLACEMENT == 0) return ncclSuccess;
  CUCOFP_CUDA(cudaEventRecord(s->done, st));
  for (cudaStream_t c : callers) unjoined().push_back({c, s});
  return ncclSuccess;
}

// auto's choices, from the reductions sweeps at W = 2 and 4 (benchmarks/results/reductions/w2_push.*, w4_push.*,
// bf16, 64 KiB to 1 GiB): push wherever it applies, for AllReduce and ReduceScatter (as fast as the fastest barrier
// kernel or faster at every size it takes: W = 2 AllReduce 64 KiB 9.7 us against 16.1, ReduceScatter 4 MiB 21.2
// against 24.4; W = 4 AllReduce 256 KiB 17.4 against 23.6); then the one-shot AllReduce up to oneShotMaxBytes(W)
// and two shot above (at W = 2 one shot was faster up to 4 MiB and two shot from 16 MiB: 79 against 85 us, and
// 3.73 against 4.28 ms at 1 GiB; at W = 4 one shot reads three buffers and loses from 1 MiB). Out of place only
// (a one-shot rank reducing into its own send buffer would change what its peers are still reading).
inline unsigned long long oneShotMaxBytes(int nranks) { return nranks == 2 ? 8ull << 20 : 256ull << 10; }

// The two-shot kernel stores its sums into every rank's recv in one pass, except from three ranks and
// kTwoShotGatherMinBytes on, where it gathers the slices by loads after a barrier (allreduceKernel says why).
constexpr unsigned long long kTwoShotGatherMinBytes = 32ull << 20;

inline bool allreduceOneShot(int nranks, const Coll& c) {
  if (c.sendLocal == c.recv || kAllReduceAlgo == 2) return false;
  return kAllReduceAlgo == 1 || c.count * (unsigned long long)c.elemBytes <= oneShotMaxBytes(nranks);
}

// allreduce=push and reducescatter=push (and auto for both) where what each peer is sent fits its staging slot
// (lsa_push.cuh): the whole buffer (AllReduce) or one rank's slice (ReduceScatter); larger ones take the barrier
// kernels, and so do the integer types (the push kernel is compiled for the floating-point ones only).
inline bool pushTyped(ncclDataType_t dt) { return dt == ncclFloat32 || dt == ncclFloat16 || dt == ncclBfloat16; }
inline bool reductionPush(int kind, ncclDataType_t dt, int nranks, const Coll& c) {
  bool asked = (kind == kAllReduce && (kAllReduceAlgo == 3 || kAllReduceAlgo == 0)) ||
               (kind == kReduceScatter && (kReduceScatterAlgo == 2 || kReduceScatterAlgo == 0));
  return asked && pushTyped(dt) && c.count * (unsigned long long)c.elemBytes <= pushMaxBytes(nranks);
}

template <class T> inline void launchReduce(int kind, const Launch& L, const Coll& c, cudaStream_t st) {
  if constexpr (Vectorised<T>::value) {
    if (c.push) {
      pushReduceKernel<T><<<kCommCtas, kThreads, 0, st>>>(L, c, kind == kReduceScatter);
      return;
    }
  }
  if (kind == kAllReduce && allreduceOneShot(L.dc.lsaSize, c)) {
    reduceKernel<T><<<kCommCtas, kThreads, 0, st>>>(L, c);   // on every rank: the one-shot AllReduce
  }
  else if (kind == kAllReduce) {
    bool stores = L.dc.lsaSize < 3 || c.count * (unsigned long long)c.elemBytes < kTwoShotGatherMinBytes;
    allreduceKernel<T><<<kCommCtas, kThreads, 0, st>>>(L, c, stores);
  }
  else if (kind == kReduce) reduceRootKernel<T><<<kCommCtas, kThreads, 0, st>>>(L, c);
  else reducescatterKernel<T><<<kCommCtas, kThreads, 0, st>>>(L, c);
}

// The reductions of type T are compiled only where the program reduces that type (CUCOFP_REDUCE_TYPES bit `Bit`,
// set by the transform from each rewritten reduction's data type; every type where it could not tell).
template <int Bit> constexpr bool kReduces = ((CUCOFP_REDUCE_TYPES >> Bit) & 1) != 0;
template <int Bit, class T>
inline ncclResult_t reduceAs(int kind, ncclDataType_t dt, const Launch& L, const Coll& c, cudaStream_t st) {
  if constexpr (kReduces<Bit>) {
    launchReduce<T>(kind, L, c, st);
    return ncclSuccess;
  } else {
    CUCOFP_FAIL(ncclInvalidArgument, "a reduction on data type %d, which the rewrite did not compile (the transform "
                "read other data types in the program's reductions; CUCOFP_REDUCE_TYPES)", (int)dt);
  }
}

inline ncclResult_t launchReduceTyped(int kind, ncclDataType_t dt, const Launch& L, const Coll& c, cudaStream_t st) {
  switch (dt) {
    case ncclInt8: return reduceAs<0, int8_t>(kind, dt, L, c, st);
    case ncclUint8: return reduceAs<1, uint8_t>(kind, dt, L, c, st);
    case ncclInt32: return reduceAs<2, int32_t>(kind, dt, L, c, st);
    case ncclUint32: return reduceAs<3, uint32_t>(kind, dt, L, c, st);
    case ncclInt64: return reduceAs<4, int64_t>(kind, dt, L, c, st);
    case ncclUint64: return reduceAs<5, uint64_t>(kind, dt, L, c, st);
    case ncclFloat16: return reduceAs<6, __half>(kind, dt, L, c, st);
    case ncclBfloat16: return reduceAs<7, __nv_bfloat16>(kind, dt, L, c, st);
    case ncclFloat32: return reduceAs<8, float>(kind, dt, L, c, st);
    case ncclFloat64: return reduceAs<9, double>(kind, dt, L, c, st);
    default: CUCOFP_FAIL(ncclInvalidArgument, "reduction on data type %d is not supported by the fast path", (int)dt);
  }
}

inline ncclResult_t launchCollective(CommState* s, const Pending& o) {
  if (o.op < 0 || o.op > kAvg) CUCOFP_FAIL(ncclInvalidArgument, "custom reduction operators are not supported");
  Coll c = {};
  c.sendLocal = o.send; c.recv = o.recv; c.count = o.count; c.elemBytes = dtypeBytes(o.dt);
  c.op = o.op; c.root = o.root;
  ncclResult_t r = ncclSuccess;
  if (o.kind == kBroadcast) r = resolve(s, o.recv, "receive", &c.send);
  else r = resolve(s, o.send, "send", &c.send);
  // peers read the AllReduce's recv (its gather phase) and write the Reduce root's recv (each rank's slice)
  if (r == ncclSuccess && (o.kind == kAllReduce || (o.kind == kReduce && o.root == s->rank)))
    r = resolve(s, o.recv, "receive", &c.recvRef);
  if (r != ncclSuccess) return r;
  if (o.kind == kAlltoAll && o.send == o.recv) CUCOFP_FAIL(ncclInvalidArgument, "in-place AlltoAll is not supported");
  if (o.kind == kBroadcast && o.root == s->rank) c.sendLocal = o.send;
  std::vector<cudaStream_t> callers{o.stream};
  cudaStream_t st = o.stream;
  if ((r = commStream(s, callers, &st)) != ncclSuccess) return r;
  if ((r = join(s, s->last ? s->last : st, st)) != ncclSuccess) return r;
  Launch L = makeLaunch(s, true);
  if (reductionPush(o.kind, o.dt, L.dc.lsaSize, c)) c.push = 1 + (int)(s->pushes++ & 1u);
  delayComm(st, s->rank);
  CUCOFP_TRACE("launch: kind %d, %zu bytes of parameters", o.kind, sizeof(Launch) + sizeof(Coll));
  bool movement = o.kind == kAllGather || o.kind == kAlltoAll || o.kind == kBroadcast;
  if (kCopyEngine && movement) {
    if ((r = launchCopies(s, o, c, L, st)) != ncclSuccess) return r;
  } else {
    switch (o.kind) {
      case kAllGather: allgatherKernel<MoveSync><<<kCommCtas, kThreads, 0, st>>>(L, c); break;
      case kAlltoAll: alltoallKernel<MoveSync><<<kCommCtas, kThreads, 0, st>>>(L, c); break;
      case kBroadcast: broadcastKernel<MoveSync><<<kCommCtas, kThreads, 0, st>>>(L, c); break;
      default: if ((r = launchReduceTyped(o.kind, o.dt, L, c, st)) != ncclSuccess) return r;
    }
  }
  CUCOFP_CUDA(cudaGetLastError());
  CUCOFP_TRACE("launch: queued");
  return afterComm(s, callers, st);
}

inline ncclResult_t launchP2p(CommState* s, const std::vector<Pending>& ops) {
  P2p g = {};
  std::vector<int> sent(s->nranks, 0), got(s->nranks, 0);
  if (ops.size() > (size_t)kMaxP2p) CUCOFP_FAIL(ncclInvalidUsage, "more than %d sends/receives in one group", kMaxP2p);
  if (s->sent.empty()) { s->sent.assign(s->nranks, 0); s->received.assign(s->nranks, 0); }
  for (const Pending& o : ops) {
    if (o.peer < 0 || o.peer >= s->nranks) CUCOFP_FAIL(ncclInvalidArgument, "peer %d out of range", o.peer);
    P2pOp& p = g.ops[g.n++];
    p.peer = o.peer; p.isSend = o.kind == -1; p.bytes = o.count * dtypeBytes(o.dt); p.recv = o.recv;
    if (++(p.isSend ? sent[o.peer] : got[o.peer]) > kMaxSlots)
      CUCOFP_FAIL(ncclInvalidUsage, "more than %d messages to one peer in one group", kMaxSlots);
    p.seq = ++(p.isSend ? s->sent[o.peer] : s->received[o.peer]);
    p.slot = (int)(p.seq % kMaxSlots);
    if (p.isSend) { ncclResult_t r = resolve(s, o.send, "send", &p.ref); if (r != ncclSuccess) return r; }
  }
  cudaStream_t st = ops[0].stream;
  ncclResult_t r = join(s, s->last ? s->last : st, st);
  for (const Pending& o : ops) if (r == ncclSuccess) r = join(s, o.stream, st);
  if (r != ncclSuccess) return r;
  Launch L = makeLaunch(s, false);
  p2pKernel<<<kCommCtas, kThreads, 0, st>>>(L, g);
  CUCOFP_CUDA(cudaGetLastError());
  for (const Pending& o : ops) if ((r = join(s, st, o.stream)) != ncclSuccess) return r;
  s->last = st;
  return ncclSuccess;
}

inline ncclResult_t flush() {
  std::vector<Pending> ops;
  ops.swap(pending());
  if (ops.empty()) return ncclSuccess;
  int dev0 = 0;
  CUCOFP_CUDA(cudaGetDevice(&dev0));
  std::vector<CommState*> states;
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    for (const Pending& o : ops) {
      CommState* s = findState(o.comm);
      if (!s && (r = newState(o.comm, &s)) != ncclSuccess) return r;
      if (std::find(states.begin(), states.end(), s) == states.end()) states.push_back(s);
    }
  }
  CUCOFP_TRACE("flush: %zu operation(s)", ops.size());
  if ((r = prepare(states)) != ncclSuccess) return r;
  CUCOFP_TRACE("flush: prepared");
  int dev = dev0;   // prepare() leaves the device it found
  for (CommState* s : states) {
    if (!s->ready) CUCOFP_FAIL(ncclInvalidUsage, "communicator %p has no device communicator (candidate not bound)", (void*)s->comm);
    if (s->device != dev) CUCOFP_CUDA(cudaSetDevice(dev = s->device));
    std::vector<Pending> p2p;
    for (const Pending& o : ops) if (o.comm == s->comm && o.kind < 0) p2p.push_back(o);
    bool p2pDone = false;
    for (const Pending& o : ops) {
      if (o.comm != s->comm) continue;
      if (o.kind >= 0) r = launchCollective(s, o);
      else if (!p2pDone) { r = launchP2p(s, p2p); p2pDone = true; }
      if (r != ncclSuccess) return r;
    }
  }
  if (dev != dev0) CUCOFP_CUDA(cudaSetDevice(dev0));
  CUCOFP_TRACE("flush: launched");
  return ncclSuccess;
}

inline ncclResult_t enqueue(const Pending& o) {
  pending().push_back(o);
  return groupDepth() > 0 ? ncclSuccess : flush();
}

inline bool windowed(void* base) {   // caller holds the registry lock
  for (CommState* s : registry().comms)
    for (const Win& w : s->wins) if (w.live && w.base == base) return true;
  return false;
}

inline bool isSym(const void* base) {
  std::lock_guard<std::mutex> lock(registry().mu);
  for (const Alloc& a : registry().allocs) if (a.base == base && a.device >= 0) return true;
  return false;
}

// Free symmetric memory. Memory still registered as a window is freed when its communicator is released,
// in the order NCCL expects (device communicator, windows, memory, communicator).
inline ncclResult_t freeSym(void* base) {
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    Registry& R = registry();
    for (Alloc& a : R.allocs)
      if (a.base == base && windowed(base)) { a.device = -1; ++R.generation; return ncclSuccess; }   // -1: freed
    ++R.generation;
    R.allocs.erase(std::remove_if(R.allocs.begin(), R.allocs.end(), [&](const Alloc& a) { return a.base == base; }), R.allocs.end());
  }
  return ncclMemFree(base);
}

inline ncclResult_t release(ncclComm_t comm) {
  CommState* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    Registry& R = registry();
    s = findState(comm);
    if (!s) return ncclSuccess;
    auto it = std::find(R.comms.begin(), R.comms.end(), s);
    if (it != R.comms.end()) R.comms.erase(it);
  }
  auto& uj = unjoined();
  uj.erase(std::remove_if(uj.begin(), uj.end(), [&](const std::pair<cudaStream_t, CommState*>& p) {
    return p.second == s; }), uj.end());
  if (s->owned) {
    CUCOFP_CUDA(cudaSetDevice(s->device));
    CUCOFP_CUDA(cudaDeviceSynchronize());
    if (s->ready) CUCOFP_NCCL(ncclDevCommDestroy(comm, &s->dc));
    for (Win& w : s->wins) if (w.live) CUCOFP_NCCL(ncclCommWindowDeregister(comm, w.win));
    if (s->mailbox) CUCOFP_NCCL(ncclMemFree(s->mailbox));
    if (s->ev) CUCOFP_CUDA(cudaEventDestroy(s->ev));
    if (s->done) CUCOFP_CUDA(cudaEventDestroy(s->done));
    if (s->side) CUCOFP_CUDA(freeSideStream(s->side));
    if (ncclResult_t r = releaseCopies(s)) return r;
    std::vector<void*> dead;
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      Registry& R = registry();
      for (const Alloc& a : R.allocs) if (a.device == -1 && !windowed(a.base)) dead.push_back(a.base);
      R.allocs.erase(std::remove_if(R.allocs.begin(), R.allocs.end(), [&](const Alloc& a) {
        return std::find(dead.begin(), dead.end(), a.base) != dead.end(); }), R.allocs.end());
      ++R.generation;
    }
    for (void* p : dead) CUCOFP_NCCL(ncclMemFree(p));
  }
  delete s;
  return ncclSuccess;
}

}  // namespace cucofp
